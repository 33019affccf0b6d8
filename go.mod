module github.com/npu-serve-smoke/npu-serve-smoke

go 1.26

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/go-github/v60 v60.0.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/sethvargo/go-githubactions v1.3.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
