package hold

// The token file (~/NPU-TOKEN, the fleet's convention) tells the holder's
// own tools who holds what. It is a convenience: the ticket is the lock. So
// a token that cannot be written is a warning, never a failed run, and the
// file is handled as one in a directory anyone might have prepared:
//
//   - it is written to a new file in the same directory and renamed into
//     place, so a symlink is never followed and a FIFO never opened for
//     writing; nothing is ever opened in a way that can block;
//   - a file already there is replaced only when it is a token of this
//     user's whose holder is gone (a stale one, left by a holder killed
//     with SIGKILL); anything else (a file of the user's own, a symlink, a
//     FIFO, a live holder's token) is left as it is;
//   - at release it is removed only if it still is the file written.

// token is what the token file holds: the holder's facts, and its ticket's
// file, whose lock tells whether the token is still true.
type token struct {
	Facts
	LockDir    string `json:"lock_dir"`
	TicketFile string `json:"ticket_file"`
}
