// A process whose child keeps moving between threads: each thread starts
// the next one and exits; the kernel re-parents the child (and so its
// listing in /proc/PID/task/TID/children) to the surviving thread.
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <signal.h>

static void *hop(void *arg) {
	pthread_t t;
	usleep(50);
	pthread_create(&t, NULL, hop, NULL);
	pthread_detach(t);
	return NULL; // this thread exits: the child moves to the next one
}

int main(int argc, char **argv) {
	pid_t c = fork();
	if (c == 0) {
		// the hidden child, and a grandchild below it
		if (fork() == 0) { execlp("sleep", "sleep", "3600", NULL); _exit(1); }
		for (;;) pause();
	}
	printf("child %d\n", c); fflush(stdout);
	pthread_t t;
	pthread_create(&t, NULL, hop, NULL);
	pthread_detach(t);
	// the leader exits as a thread only (the process lives on)
	syscall(SYS_exit, 0);
	return 0;
}
