package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The examples of docs/beam.md run as written. They are ```text blocks
// there, because the root module's docs test (cmd/dpsql's
// TestReadmeShellBlocks) would build dpsql-beam itself, beyond its time per
// block; this test runs each block that calls beam/dpsql-beam with the
// binaries this test binary builds anyway (dpsql-beam and prism as the
// portable tests build them, dpsql from the root module), in one empty
// directory (a block may use what an earlier one made) whose beam/dpsql-beam
// and beam/prism are those binaries. The build block is what buildPortable
// runs; the Fashion-MNIST block needs the dataset, which tests must not
// require, and runs only when it is installed.
func TestDocsBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the docs' Beam examples run whole pipelines")
	}
	md, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "beam.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for i, part := range strings.Split(string(md), "```text\n") {
		if i == 0 {
			continue
		}
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatalf("docs/beam.md: a ```text block is not closed")
		}
		if strings.Contains(block, "beam/dpsql-beam ") && !strings.Contains(block, "go build") {
			blocks = append(blocks, block)
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("docs/beam.md: %d blocks that run beam/dpsql-beam, want the avgmix and aggregate examples at least", len(blocks))
	}
	buildPortable(t)
	dpsql := dpsqlBinary(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "beam"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, bin := range map[string]string{"dpsql-beam": portableBins.dpbeam, "prism": portableBins.prism} {
		if err := os.Symlink(bin, filepath.Join(dir, "beam", name)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(dpsql)+string(os.PathListSeparator)+os.Getenv("PATH"))
	ran := 0
	for _, b := range blocks {
		if strings.Contains(b, "/usr/share/datasets/") {
			if _, err := os.Stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); err != nil {
				t.Logf("skipping the Fashion-MNIST block: the dataset is not installed (apt-get install dataset-fashion-mnist)")
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-x", "-c", b)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 5 * time.Second // a server a block left running must not hang the test
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("docs/beam.md block failed: %v\n--- the block ---\n%s--- its output ---\n%s", err, b, out.String())
			continue
		}
		ran++
		if strings.Contains(out.String(), "warning:") {
			t.Errorf("docs/beam.md block printed a warning:\n%s", out.String())
		}
	}
	if ran < 2 {
		t.Errorf("only %d of docs/beam.md's blocks ran", ran)
	}
}
