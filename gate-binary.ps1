# The gate's binary for action.yml on a Windows runner, written to
# $env:GITHUB_OUTPUT as bin=PATH: gate-binary.sh's three ways, in Windows
# PowerShell 5.1 with nothing installed but the runner.
#
#  1. A release binary, when checksums.txt beside action.yml was made from
#     this very source (its "# source" line is the hash of the tree's Go
#     files, computed again here exactly as gate-binary.sh computes it) and
#     names npu-serve-smoke_VERSION_windows_GOARCH.exe for this runner's
#     RUNNER_ARCH (X64: amd64, ARM64: arm64): downloaded once into the
#     runner's tool cache (RUNNER_TOOL_CACHE\npu-serve-smoke\VERSION\ARCH
#     plus ARCH.complete). Every run copies it into a new directory of this
#     job's RUNNER_TEMP (a random name, its ACL the runner's account, SYSTEM
#     and the Administrators alone, inherited by nothing above), checks the
#     COPY's SHA-256 (Get-FileHash) against checksums.txt, and runs the
#     copy: the cache is shared with every job of the runner's account, and
#     a file swapped there after the check is never the one that runs. A
#     binary whose SHA-256 differs is refused: nothing is cached or run.
#  2. Else (no release of this source, or its download failed) a build from
#     source when go is on PATH, every run, into a new directory of this
#     job's RUNNER_TEMP; only Go's own build cache is kept between runs.
#  3. Else an error naming both ways out.
#
# Environment: as gate-binary.sh's (ACTION_PATH, ACTION_REPOSITORY,
# ACTION_REF, RUNNER_OS, RUNNER_ARCH, RUNNER_TOOL_CACHE, RUNNER_TEMP,
# GITHUB_SERVER_URL, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY,
# NPU_SERVE_SMOKE_DOWNLOAD_URL).
#
# `gate-binary.ps1 source-hash DIR` prints the source hash of DIR
# (internal/release.SourceHash and gate-binary.sh source-hash).
#
# This file is ASCII: Windows PowerShell 5.1 reads a script without a byte
# order mark in the system's ANSI code page. What it writes for the runner
# (GITHUB_OUTPUT, the job summary) is UTF-8 without a byte order mark, never
# through Out-File, Set-Content or '>>', which write UTF-16 or a mark there.
param([string]$Command = '', [string]$Dir = '')

Set-StrictMode -Version 2.0
$ErrorActionPreference = 'Stop'
# Invoke-WebRequest's progress bar slows a download many times over.
$ProgressPreference = 'SilentlyContinue'

$utf8 = New-Object System.Text.UTF8Encoding $false

function Say([string]$text) { [Console]::Out.WriteLine($text) }

# Fail TEXT: an error annotation, and the same words in the job summary,
# where a reader of the run looks first when the gate has no result.
function Fail([string]$text) {
	Say "::error title=npu serve smoke::$text"
	if ($env:GITHUB_STEP_SUMMARY) {
		$cross = [string][char]0x274C
		try {
			[System.IO.File]::AppendAllText($env:GITHUB_STEP_SUMMARY, "### $cross npu serve smoke: the gate did not run`n`n$text`n", $utf8)
		} catch {
		}
	}
}

# HexOf BYTES: lower-case hex, two digits a byte.
function HexOf([byte[]]$bytes) {
	[System.BitConverter]::ToString($bytes).Replace('-', '').ToLowerInvariant()
}

function Sha256OfBytes([byte[]]$bytes) {
	$h = [System.Security.Cryptography.SHA256]::Create()
	try { HexOf ($h.ComputeHash($bytes)) } finally { $h.Dispose() }
}

# FileSha256 FILE: the file's SHA-256, lower-case hex as sha256sum prints it.
function FileSha256([string]$path) {
	(Get-FileHash -LiteralPath $path -Algorithm SHA256).Hash.ToLowerInvariant()
}

# SourceHash DIR: gate-binary.sh's source_hash. The SHA-256 of the lines
# "<sha256 of the file>  ./<path>`n" of every regular non-test .go file,
# go.mod and go.sum under DIR (names compared case by case, as find -name
# does), DIR's own .git left out, the paths with / as find prints them and
# sorted by their UTF-8 bytes as LC_ALL=C sort sorts them. A link (a reparse
# point) is neither followed nor taken, as find -type f takes none.
function SourceHash([string]$root) {
	# Sorted by the hex of each path's bytes: two hex digits a byte, so the
	# order of the keys is the bytewise order of the paths.
	$lines = New-Object 'System.Collections.Generic.SortedDictionary[string,string]' ([System.StringComparer]::Ordinal)
	$todo = New-Object System.Collections.Stack
	$todo.Push(@((New-Object System.IO.DirectoryInfo $root), '.'))
	while ($todo.Count -gt 0) {
		$d, $rel = $todo.Pop()
		foreach ($e in $d.GetFileSystemInfos()) {
			if (($e.Attributes -band [System.IO.FileAttributes]::ReparsePoint) -ne 0) {
				continue
			}
			$p = $rel + '/' + $e.Name
			if (($e.Attributes -band [System.IO.FileAttributes]::Directory) -ne 0) {
				if ($p -cne './.git') {
					$todo.Push(@($e, $p))
				}
				continue
			}
			$n = $e.Name
			$go = $n.EndsWith('.go', [System.StringComparison]::Ordinal) -and -not $n.EndsWith('_test.go', [System.StringComparison]::Ordinal)
			if ($go -or $n -ceq 'go.mod' -or $n -ceq 'go.sum') {
				$sum = Sha256OfBytes ([System.IO.File]::ReadAllBytes($e.FullName))
				$lines.Add((HexOf ($utf8.GetBytes($p))), "$sum  $p`n")
			}
		}
	}
	Sha256OfBytes ($utf8.GetBytes((-join @($lines.Values))))
}

# NewPrivateDir PARENT PREFIX: a new directory PARENT\PREFIX<random> whose
# ACL gives the runner's account, SYSTEM and the Administrators full
# control and no one else anything, inherited by nothing above it (what
# mktemp -d's mode 0700 is on Linux): a name no other job knows.
function NewPrivateDir([string]$parent, [string]$prefix) {
	$sec = New-Object System.Security.AccessControl.DirectorySecurity
	$sec.SetAccessRuleProtection($true, $false)
	$who = @(
		[System.Security.Principal.WindowsIdentity]::GetCurrent().User,
		(New-Object System.Security.Principal.SecurityIdentifier 'S-1-5-18'),
		(New-Object System.Security.Principal.SecurityIdentifier 'S-1-5-32-544')
	)
	foreach ($sid in $who) {
		$rule = New-Object System.Security.AccessControl.FileSystemAccessRule($sid, 'FullControl', 'ContainerInherit, ObjectInherit', 'None', 'Allow')
		$sec.AddAccessRule($rule)
	}
	for ($i = 0; $i -lt 10; $i++) {
		$d = Join-Path $parent ($prefix + [System.IO.Path]::GetRandomFileName().Replace('.', ''))
		if (-not (Test-Path -LiteralPath $d)) {
			$null = [System.IO.Directory]::CreateDirectory($d, $sec)
			return $d
		}
	}
	throw "no new directory could be made in $parent"
}

# Download URL FILE, three tries 2 s apart, each of 300 s at most.
function Download([string]$url, [string]$file) {
	# TLS 1.2, which github.com requires, where .NET's defaults predate it.
	[Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
	for ($try = 1; ; $try++) {
		try {
			Invoke-WebRequest -UseBasicParsing -Uri $url -OutFile $file -TimeoutSec 300
			return $true
		} catch {
			Say "npu-serve-smoke: downloading $url (try $try of 3): $($_.Exception.Message)"
			if ($try -ge 3) {
				return $false
			}
			Start-Sleep -Seconds 2
		}
	}
}

function TempRoot {
	if ($env:RUNNER_TEMP) { return $env:RUNNER_TEMP }
	return [System.IO.Path]::GetTempPath()
}

# Release: sets $script:bin to a verified release binary, or $script:why to
# the reason there is none. Exits 1 when a downloaded binary is not the
# released one.
function Release {
	$sums = Join-Path $env:ACTION_PATH 'checksums.txt'
	if ($env:RUNNER_OS -cne 'Windows') {
		$script:why = "this step is for Windows runners (Linux runs gate-binary.sh), and this runner is $env:RUNNER_OS"
		return
	}
	switch -CaseSensitive ("$env:RUNNER_ARCH") {
		'X64' { $goarch = 'amd64'; $arch = 'x64' }
		'ARM64' { $goarch = 'arm64'; $arch = 'arm64' }
		default {
			$script:why = "releases hold X64 and ARM64 binaries, and this runner is $(if ($env:RUNNER_ARCH) { $env:RUNNER_ARCH } else { 'of an unknown arch' })"
			return
		}
	}
	if (-not (Test-Path -LiteralPath $sums -PathType Leaf)) {
		$script:why = "the action's tree has no checksums.txt: this source was never released"
		return
	}
	$version = ''
	$src = ''
	$text = [System.IO.File]::ReadAllLines($sums)
	foreach ($line in $text) {
		if (-not $version -and $line -cmatch '^# npu-serve-smoke (v[0-9][0-9A-Za-z.-]*): ') {
			$version = $Matches[1]
		}
		if (-not $src -and $line -cmatch '^# source ([0-9a-f]*)$') {
			$src = $Matches[1]
		}
	}
	$asset = "npu-serve-smoke_${version}_windows_${goarch}.exe"
	$want = ''
	foreach ($line in $text) {
		$f = -split $line
		if ($f.Count -ge 2 -and $f[1] -ceq $asset -and $f[0] -cmatch '^[0-9a-f]{64}$') {
			$want = $f[0]
			break
		}
	}
	if (-not $version -or -not $want) {
		$script:why = "checksums.txt names no $asset"
		return
	}
	if ((SourceHash $env:ACTION_PATH) -cne $src) {
		$script:why = "this source is not release $version's (a branch, a fork or a local checkout)"
		return
	}

	$origin = ''
	if ($env:ACTION_REPOSITORY) {
		$ref = if ($env:ACTION_REF) { $env:ACTION_REF } else { '?' }
		$origin = " of $($env:ACTION_REPOSITORY)@$ref"
	}
	$cacheRoot = if ($env:RUNNER_TOOL_CACHE) { $env:RUNNER_TOOL_CACHE } else { TempRoot }
	$cache = Join-Path $cacheRoot ('npu-serve-smoke\' + $version.Substring(1) + '\' + $arch)
	$file = Join-Path $cache 'npu-serve-smoke.exe'
	$complete = "$cache.complete"
	# What runs is a copy in this job's own directory, checked after it was
	# copied: whatever happens to the cache from here on, the bytes checked
	# are the bytes run.
	$run = NewPrivateDir (TempRoot) 'npu-serve-smoke-bin.'
	$copy = Join-Path $run 'npu-serve-smoke.exe'
	if ((Test-Path -LiteralPath $complete -PathType Leaf) -and (Test-Path -LiteralPath $file -PathType Leaf)) {
		# A cache that changes under the copy fails the check (or the copy)
		# and is downloaded again.
		$copied = $true
		try { [System.IO.File]::Copy($file, $copy) } catch { $copied = $false }
		if ($copied -and (FileSha256 $copy) -ceq $want) {
			Say "npu-serve-smoke: release $version$origin for $arch, cached and verified (SHA-256 $want); runs as the checked copy $copy"
			$script:bin = $copy
			return
		}
		if (Test-Path -LiteralPath $copy) { Remove-Item -LiteralPath $copy -Force }
		Say "::warning title=npu serve smoke::the cached $file does not match checksums.txt; downloading it again"
	}
	if (Test-Path -LiteralPath $complete) { Remove-Item -LiteralPath $complete -Force }

	if ($env:NPU_SERVE_SMOKE_DOWNLOAD_URL) {
		$base = $env:NPU_SERVE_SMOKE_DOWNLOAD_URL.TrimEnd('/')
	} elseif ($env:ACTION_REPOSITORY) {
		$server = if ($env:GITHUB_SERVER_URL) { $env:GITHUB_SERVER_URL } else { 'https://github.com' }
		$base = "$server/$($env:ACTION_REPOSITORY)/releases/download"
	} else {
		Remove-Item -LiteralPath $run -Recurse -Force
		$script:why = "the action's repository is not known here (uses: ./), so there is nothing to download"
		return
	}
	$url = "$base/$version/$asset"
	# Downloaded into this job's directory and checked there; the cache gets
	# a copy of the checked file, for the next job to check again.
	if (-not (Download $url $copy)) {
		Remove-Item -LiteralPath $run -Recurse -Force
		$script:why = "downloading $url failed"
		return
	}
	$got = FileSha256 $copy
	if ($got -cne $want) {
		Remove-Item -LiteralPath $run -Recurse -Force
		Fail "$url has SHA-256 $got, and checksums.txt at this action's commit says $want for $asset. The download is refused: nothing was cached or run. A release asset that differs from the committed checksums was replaced or damaged after the release; report it to the action's maintainers."
		exit 1
	}
	# The cache is for the next job, which checks it again: a cache that
	# cannot be written (another job copying from it) costs that job a
	# download, never this one its run.
	$tmp = ''
	try {
		$null = [System.IO.Directory]::CreateDirectory($cache)
		$tmp = Join-Path $cache ('.download.' + [System.IO.Path]::GetRandomFileName().Replace('.', ''))
		[System.IO.File]::Copy($copy, $tmp)
		if ([System.IO.File]::Exists($file)) {
			[System.IO.File]::Replace($tmp, $file, $null)
		} else {
			[System.IO.File]::Move($tmp, $file)
		}
		[System.IO.File]::WriteAllText($complete, '')
	} catch {
		if ($tmp -and (Test-Path -LiteralPath $tmp)) { Remove-Item -LiteralPath $tmp -Force }
		Say "::warning title=npu serve smoke::the tool cache $cache could not be written ($($_.Exception.Message)); this run uses its verified download all the same"
	}
	Say "npu-serve-smoke: release $version$origin for $arch, downloaded from $url and verified (SHA-256 $want); runs as the checked copy $copy"
	$script:bin = $copy
}

# Build: the gate built from the action's source into a new directory of
# this job's temp (a name no earlier job could know), with Go's build cache
# as the only thing kept between runs.
function Build {
	$d = NewPrivateDir (TempRoot) 'npu-serve-smoke-build.'
	$out = Join-Path $d 'npu-serve-smoke.exe'
	Push-Location -LiteralPath $env:ACTION_PATH
	# go writes to stderr, which Windows PowerShell turns into error records:
	# printed as lines, judged by go's exit code alone.
	$ErrorActionPreference = 'Continue'
	try {
		& go build -trimpath -o $out ./cmd/action 2>&1 | ForEach-Object { Say "$_" }
		$code = $LASTEXITCODE
		$gov = (& go env GOVERSION 2>$null | Out-String).Trim()
	} finally {
		$ErrorActionPreference = 'Stop'
		Pop-Location
	}
	if ($code -ne 0) {
		Fail "go build ./cmd/action failed (exit $code): the lines above say why."
		exit 1
	}
	Say "npu-serve-smoke: built from source into $d ($gov)"
	$script:bin = $out
}

function Main {
	$script:bin = ''
	$script:why = ''
	Release
	if (-not $script:bin) {
		if (-not (Get-Command go -CommandType Application -ErrorAction SilentlyContinue)) {
			Fail "No release binary for this runner: $script:why. And Go is not installed to build one from the action's source. Either install Go 1.26 on the runner (or add actions/setup-go before this step), or use a released tag of the action (uses: OWNER/npu-serve-smoke@vX.Y.Z on Linux or Windows, X64 or ARM64)."
			exit 2
		}
		$at = if ($env:ACTION_REF) { " at $env:ACTION_REF" } else { '' }
		Say "npu-serve-smoke: no release binary ($script:why); building from the action's source$at"
		Build
	}
	[System.IO.File]::AppendAllText($env:GITHUB_OUTPUT, "bin=$script:bin`n", $utf8)
}

switch -CaseSensitive ($Command) {
	'' { Main; exit 0 }
	'source-hash' { Say (SourceHash $Dir); exit 0 }
	default {
		[Console]::Error.WriteLine('usage: gate-binary.ps1 [source-hash DIR]')
		exit 2
	}
}
