package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlock is one ```sh or ```bash block of README.md or a page of docs/.
type readmeBlock struct {
	file    string // README.md or docs/PAGE.md, set by docBlocks
	line    int    // line of the opening fence, counting from 1
	section string // the heading above it
	shell   string // "sh" or "bash"
	text    string
}

func (b readmeBlock) name() string {
	return fmt.Sprintf("%s:%d (%s)", b.file, b.line, b.section)
}

// docFiles lists the Markdown files whose shell blocks run as written:
// README.md first, then every docs/*.md in name order, relative to root.
func docFiles(root string) ([]string, error) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files := []string{"README.md"}
	for _, p := range pages { // Glob sorts
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files, nil
}

// docBlocks reads the shell blocks of every file docFiles lists, in order.
func docBlocks(root string) ([]readmeBlock, error) {
	files, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	var all []readmeBlock
	for _, f := range files {
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		blocks, err := readmeBlocks(string(md))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for i := range blocks {
			blocks[i].file = f
		}
		all = append(all, blocks...)
	}
	return all, nil
}

// userHome and userCacheHome are the environment's before TestMain points
// HOME at a temporary directory.
var userHome, userCacheHome = os.Getenv("HOME"), os.Getenv("XDG_CACHE_HOME")

var fenceRE = regexp.MustCompile("^```([A-Za-z0-9_+-]*)\\s*$")

// readmeBlocks extracts the shell blocks of a Markdown text, in order.
func readmeBlocks(md string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	var cur *readmeBlock
	inFence := false
	section := "top"
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := fenceRE.FindStringSubmatch(line)
		switch {
		case !inFence && m != nil:
			inFence = true
			if m[1] == "sh" || m[1] == "bash" {
				cur = &readmeBlock{line: n, section: section, shell: m[1]}
			}
		case inFence && m != nil && m[1] != "":
			return nil, fmt.Errorf("line %d: a ```%s block opens inside another code block (a closing ``` missing above?)", n, m[1])
		case inFence && line == "```":
			inFence = false
			if cur != nil {
				blocks = append(blocks, *cur)
				cur = nil
			}
		case inFence && cur != nil:
			cur.text += line + "\n"
		case !inFence && strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if inFence {
		return nil, fmt.Errorf("the text ends inside a code block")
	}
	return blocks, sc.Err()
}

func TestReadmeBlocksExtracted(t *testing.T) {
	md := "# T\n```sh\necho a\n```\n## S\n```go\nx\n```\n```bash\necho b\necho c\n```\n```\nplain\n```\n"
	got, err := readmeBlocks(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []readmeBlock{{"", 2, "T", "sh", "echo a\n"}, {"", 9, "S", "bash", "echo b\necho c\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("blocks %v, want %v", got, want)
	}
}

// TestReadmeShellBlocks runs every ```sh and ```bash block of README.md and
// then of docs/*.md (in name order) as written, in order, in one fresh copy
// of the repository (every block from its root) (so that ./cmd/dpsql
// resolves and files one block writes are there for the next), with a freshly
// built dpsql first on PATH, HOME and GOBIN in a temporary directory, no
// network (GOPROXY=off) and standard input empty. Each block runs with -e
// (stop at the first failing command) and -x (commands traced with "+"), so a
// failure shows the block, the command and its output.
//
// A block's output must hold no "warning:" unless the block's text mentions a
// warning, and the binaries the blocks build must be ignored by .gitignore.
// Other blocks (```text, ```sql, ```go) are not run: write commands that
// cannot run here (a cluster, a dataset not installed) in a ```text block.
//
// To rerun after editing the docs: go test ./cmd/dpsql -run TestReadmeShellBlocks -v
func TestReadmeShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the README's and docs' blocks build dpsql and run it")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 || blocks[0].file != "README.md" {
		t.Fatal("README.md has no sh or bash blocks")
	}

	tmp := t.TempDir()
	clone := filepath.Join(tmp, "dpsql")
	if err := copySourceTree(root, clone); err != nil {
		t.Fatalf("copying the repository: %v", err)
	}
	bin, gobin, home := filepath.Join(tmp, "bin"), filepath.Join(tmp, "gobin"), filepath.Join(tmp, "home")
	for _, d := range []string{bin, gobin, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"PATH=" + gobin + string(os.PathListSeparator) + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GOBIN=" + gobin, "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local",
		"TMPDIR=" + tmp,
	}
	// The user's Go build and module caches (TestMain moved HOME), so that
	// the blocks' go commands build from cache, without the network.
	goEnv := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH")
	goEnv.Env = append(os.Environ(), "HOME="+userHome, "XDG_CACHE_HOME="+userCacheHome)
	out, err := goEnv.Output()
	if f := strings.Fields(string(out)); err != nil || len(f) != 3 {
		t.Fatalf("go env: %v %q", err, out)
	} else {
		env = append(env, "GOCACHE="+f[0], "GOMODCACHE="+f[1], "GOPATH="+f[2])
	}
	for _, kv := range os.Environ() { // the compiler settings go uses
		if k, _, _ := strings.Cut(kv, "="); k == "GOROOT" || k == "CC" || k == "CGO_ENABLED" || strings.HasPrefix(k, "CGO_") {
			env = append(env, kv)
		}
	}

	build := exec.Command("go", "build", "-o", filepath.Join(bin, "dpsql"), "./cmd/dpsql")
	build.Dir = root
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dpsql: %v\n%s", err, out)
	}

	before, err := treeFiles(clone)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range blocks {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, b.shell, "-e", "-x", "-c", withoutRunningTests(b.text))
		cmd.Dir = clone
		cmd.Env = env
		cmd.Stdin = strings.NewReader("")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 5 * time.Second // a child left holding the output must not hang the test
		start := time.Now()
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("block %d of %d, %s, failed after %v: %v\n--- the block (%s) ---\n%s--- its output (commands traced with +) ---\n%s",
				i+1, len(blocks), b.name(), time.Since(start).Round(time.Millisecond), err, b.shell, b.text, out.String())
			continue
		}
		// A block that warns the reader would be a block the reader then
		// has to fix (a token file others can read, say), unless the block
		// means to show the warning and says so.
		if strings.Contains(out.String(), "warning:") && !strings.Contains(strings.ToLower(b.text), "warn") {
			t.Errorf("block %d of %d, %s, printed a warning; fix the block, or say in it that it warns:\n%s", i+1, len(blocks), b.name(), out.String())
		}
		t.Logf("block %d of %d, %s: ok in %v", i+1, len(blocks), b.name(), time.Since(start).Round(time.Millisecond))
	}

	// What the blocks build (dp0.so and dp0.h, dpsql-beam) must not show up
	// in a user's git status: .gitignore covers every binary they leave.
	after, err := treeFiles(clone)
	if err != nil {
		t.Fatal(err)
	}
	for f, mode := range after {
		if _, old := before[f]; old || !isBuildOutput(f, mode) {
			continue
		}
		check := exec.Command("git", "check-ignore", "--no-index", "-q", f)
		check.Dir = root
		if err := check.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				if os.Getenv("CI") != "" {
					t.Fatalf("git check-ignore (git is needed to check .gitignore): %v", err)
				}
				t.Skipf("git check-ignore: %v (git is missing: apt-get install -y git; under CI this fails)", err)
			}
			t.Errorf("the blocks leave %s, which .gitignore does not cover: git status would show it", f)
		}
	}
}

// treeFiles lists the files under dir (relative, slash-separated) with their
// modes, skipping .git.
func treeFiles(dir string) (map[string]fs.FileMode, error) {
	files := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = info.Mode()
		return nil
	})
	return files, err
}

// isBuildOutput reports whether a file a block wrote looks like something go
// build makes: an executable, a shared or static library, or a C header.
func isBuildOutput(name string, mode fs.FileMode) bool {
	switch filepath.Ext(name) {
	case ".so", ".h", ".a", ".dylib", ".dll", ".exe":
		return true
	}
	return mode.IsRegular() && mode&0o111 != 0
}

// withoutRunningTests turns each README line that runs the test suite
// (`go test ...`, the README's second set-up command) into one that compiles
// and vets every test but runs none, so this test checks the command works
// without running itself again.
func withoutRunningTests(block string) string {
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(strings.TrimLeft(l, " \t"), "go test "); ok {
			lines[i] = "go test -run '^$' " + rest
		}
	}
	return strings.Join(lines, "\n")
}

// copySourceTree copies the repository's files into dst: those git tracks or
// would track (untracked files that are not ignored), or, without git, every
// file outside .git that is not a database or a binary dpsql build.
func copySourceTree(root, dst string) error {
	var files []string
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, filepath.FromSlash(f))
			}
		}
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			switch {
			case d.IsDir() && d.Name() == ".git":
				return filepath.SkipDir
			case d.IsDir(), rel == "dpsql", strings.Contains(d.Name(), ".db"):
				return nil
			}
			files = append(files, rel)
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) { // deleted but not yet committed
			continue
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func TestReadmeBlocksUnclosedFence(t *testing.T) {
	if _, err := readmeBlocks("```sh\necho a\n\n```go\nx\n```\n"); err == nil {
		t.Fatal("a block opening inside an unclosed one was accepted")
	}
}

func TestWithoutRunningTests(t *testing.T) {
	got := withoutRunningTests("go run ./cmd/dpsql demo\ngo test ./...   # the suite\n  go test -v ./x\necho go test\n")
	want := "go run ./cmd/dpsql demo\ngo test -run '^$' ./...   # the suite\ngo test -run '^$' -v ./x\necho go test\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
