package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"google.golang.org/protobuf/proto"
)

// TestHelp: the help names the commands and the flags users need first,
// not Beam's hundred flags; a command's -h lists its own options and the
// Beam flags that say where it runs; help beam lists them all. --help
// reaches the help, not Beam's worker (which printed every Beam flag).
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		if isWorkerArgs(args) || isBootArgs(args) {
			t.Fatalf("%v would start a worker", args)
		}
		code, out, _ := run(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, want := range []string{"avgmix", "aggregate", "worker-pool", "--runner=universal", "--environment_type=PROCESS"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: the help lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, "dataflow") || strings.Count(out, "\n") > 40 {
			t.Errorf("%v: the help lists Beam's flags (%d lines):\n%s", args, strings.Count(out, "\n"), out)
		}
	}
	for _, cmd := range []string{"aggregate", "avgmix"} {
		code, _, errs := run(t, nil, cmd, "-h")
		if code != 0 {
			t.Fatalf("%s -h: exit %d", cmd, code)
		}
		for _, want := range []string{"Usage: dpsql-beam " + cmd, "-db", "-into", "-csv", "-runner", "-endpoint", "-environment_config", "dpsql-beam help beam"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s -h lacks %q:\n%s", cmd, want, errs)
			}
		}
		if strings.Contains(errs, "dataflow") {
			t.Errorf("%s -h lists every Beam flag:\n%s", cmd, errs)
		}
	}
	if code, out, _ := run(t, nil, "help", "beam"); code != 0 || !strings.Contains(out, "-dataflow_service_options") && !strings.Contains(out, "-staging_location") {
		t.Errorf("help beam: exit %d, does not list Beam's flags:\n%.500s", code, out)
	}
	for _, args := range [][]string{
		{"--worker", "--id=1", "--control_endpoint=x", "--logging_endpoint=y"},
		{"--worker=true", "--id=1"},
	} {
		if !isWorkerArgs(args) {
			t.Errorf("%v does not start Beam's worker", args)
		}
	}
	if !isBootArgs([]string{"--id='a_go'", "--provision_endpoint=localhost:1"}) || isBootArgs([]string{"--worker", "--provision_endpoint=x"}) {
		t.Error("boot arguments misread")
	}
}

// TestCheckStagedWorker: a worker serves a job only if the job staged this
// very binary; another build, or no binary, is refused.
func TestCheckStagedWorker(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "dpsql-beam")
	if err := os.WriteFile(self, []byte("this binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("this binary"))
	staged := func(sha string) []*pipepb.ArtifactInformation {
		p, _ := proto.Marshal(&pipepb.ArtifactFilePayload{Path: "/driver/dpsql-beam", Sha256: sha})
		return []*pipepb.ArtifactInformation{{TypeUrn: "beam:artifact:type:file:v1", TypePayload: p,
			RoleUrn: "beam:artifact:role:go_worker_binary:v1"}}
	}
	if err := checkStagedWorker(staged(hex.EncodeToString(sum[:])), self); err != nil {
		t.Fatalf("this binary refused: %v", err)
	}
	other := sha256.Sum256([]byte("another build"))
	if err := checkStagedWorker(staged(hex.EncodeToString(other[:])), self); err == nil || !strings.Contains(err.Error(), "same dpsql-beam build") {
		t.Fatalf("another build: %v", err)
	}
	if err := checkStagedWorker(nil, self); err == nil {
		t.Fatal("a job without a staged binary was served")
	}
}

// TestUniversalRunnerNeedsEndpoint: a portable runner without the job
// server's address is refused before the charge (the SDK says so only at
// submission, after it).
func TestUniversalRunnerNeedsEndpoint(t *testing.T) {
	// Beam's flags are the process's: the in-process prism runner of an
	// earlier test left its own address in --endpoint.
	endpoint := *jobopts.Endpoint
	*jobopts.Endpoint = ""
	t.Cleanup(func() { *runners.Runner, *jobopts.Endpoint = "", endpoint })
	path, db := visitsSchema(t, t.TempDir(), 5, 1e-5)
	code, _, errs := run(t, nil, "aggregate", "--db", path, "--into", "rel", "--query", wardQuery, "--runner=universal")
	if code != 2 || !strings.Contains(errs, "needs --endpoint") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if n := len(ledgerRows(t, db)); n != 0 {
		t.Fatalf("%d charges for a job that could not be submitted", n)
	}
}
