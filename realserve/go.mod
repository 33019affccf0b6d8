module github.com/npu-serve-smoke/npu-serve-smoke/realserve

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/npu-serve-smoke/npu-serve-smoke v0.0.0
	github.com/ollama/ollama v0.12.11
	github.com/x448/float16 v0.8.4
)

require (
	github.com/google/go-github/v60 v60.0.0 // indirect
	github.com/google/go-querystring v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/sethvargo/go-githubactions v1.3.2 // indirect
	golang.org/x/crypto v0.36.0 // indirect
	golang.org/x/sync v0.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/npu-serve-smoke/npu-serve-smoke => ../

tool github.com/npu-serve-smoke/npu-serve-smoke/cmd/action
