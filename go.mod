module github.com/npu-serve-smoke/npu-serve-smoke

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	golang.org/x/sys v0.50.0
)

require github.com/sethvargo/go-githubactions v1.3.2

require (
	github.com/google/go-github/v60 v60.0.0
	github.com/google/go-querystring v1.1.0 // indirect
)

require (
	github.com/rogpeppe/go-internal v1.16.0
	golang.org/x/tools v0.26.0 // indirect
)
