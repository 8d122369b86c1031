package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The TestPortable tests run the pipelines through Beam's portable runner
// protocol with the workers in processes of their own: prism as a
// stand-alone job server (its own process, built from the module cache), the
// driver (a dpsql-beam process, this test's user) submitting with
// --runner=universal --endpoint=..., and the DoFns in dpsql-beam worker
// processes that prism starts (--environment_type=PROCESS) or that a
// `dpsql-beam worker-pool` process starts (EXTERNAL). prism and the pool run
// as another user (nobody, through setpriv), so their workers can read the
// shards and write the staging directory but cannot open the database file,
// which lies in a directory only the driver's user can enter: a worker that
// opened it would fail the job (TestPortableWorkersCannotOpenDB shows that
// it would).

// portableBins are prism and dpsql-beam, built once per test binary.
var portableBins struct {
	once          sync.Once
	dir           string
	prism, dpbeam string
	err           error
}

func buildPortable(t *testing.T) {
	t.Helper()
	b := &portableBins
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "dpsql-beam-bin-"); b.err != nil {
			return
		}
		if b.err = os.Chmod(b.dir, 0o755); b.err != nil {
			return
		}
		b.prism, b.dpbeam = filepath.Join(b.dir, "prism"), filepath.Join(b.dir, "dpsql-beam")
		for _, c := range [][]string{
			{"go", "build", "-o", b.prism, "github.com/apache/beam/sdks/v2/go/cmd/prism"},
			{"go", "build", "-o", b.dpbeam, "."},
		} {
			cmd := exec.Command(c[0], c[1:]...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.err = fmt.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
				return
			}
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if portableBins.dir != "" {
		os.RemoveAll(portableBins.dir)
	}
	os.Exit(code)
}

// portable is a job server and a worker pool, each in its own process.
type portable struct {
	endpoint string // prism's job service
	pool     string // the worker pool's address
	poolLog  *syncBuffer
	shared   string // a directory the workers can read (the shards) and write (staging)
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// asWorkerUser returns the command prefix that runs a process as a user who
// cannot open the test's database file.
func asWorkerUser(t *testing.T) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		if os.Getenv("CI") != "" {
			t.Fatal("the portable tests run on Linux under CI: they isolate the workers the Linux way (setpriv, file modes)")
		}
		t.Skip("the portable tests isolate the workers the Linux way (setpriv, file modes)")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the portable tests run as root under CI: they start the workers as another user (setpriv) so that they cannot open the database file")
		}
		t.Skip("not root: the portable tests start the workers as another user (setpriv) so that they cannot open the database file")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("setpriv (util-linux) is missing: the portable tests need it to start the workers as another user")
		}
		t.Skip("setpriv (util-linux) is missing: the portable tests need it to start the workers as another user")
	}
	// --pdeathsig: a test binary that dies (a timeout) takes its servers along.
	return []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--pdeathsig=KILL"}
}

// startPortable starts prism and a worker pool as another user, stopped at
// the end of the test.
func startPortable(t *testing.T) *portable {
	t.Helper()
	prefix := asWorkerUser(t)
	buildPortable(t)
	shared, err := os.MkdirTemp("", "dpsql-beam-portable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(shared, "staging"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(shared, "staging"), 0o777)
	p := &portable{shared: shared, poolLog: &syncBuffer{}}
	start := func(name string, log *syncBuffer, pattern *regexp.Regexp, args ...string) string {
		argv := append(append([]string(nil), prefix...), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = "/" // not the driver's directory: relative paths must not reach the workers
		cmd.Env = []string{"HOME=/nonexistent", "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if m := pattern.FindStringSubmatch(log.String()); m != nil {
				return m[1]
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s did not say where it serves:\n%s", name, log.String())
		return ""
	}
	prismLog := &syncBuffer{}
	p.endpoint = start("prism", prismLog, regexp.MustCompile(`endpoint=(localhost:\d+)`),
		portableBins.prism, "--job_port=0", "--serve_http=false", "--log_kind=text")
	p.pool = start("the worker pool", p.poolLog, regexp.MustCompile(`serving on (\S+)`),
		portableBins.dpbeam, "worker-pool", "--listen=localhost:0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prism's log:\n%s\nthe worker pool's log:\n%s", prismLog.String(), p.poolLog.String())
		}
	})
	return p
}

// environments are the two ways a portable runner gets worker processes.
func (p *portable) environments() map[string][]string {
	cfg, _ := json.Marshal(map[string]string{"command": portableBins.dpbeam})
	return map[string][]string{
		"PROCESS":  {"--environment_type=PROCESS", "--environment_config=" + string(cfg)},
		"EXTERNAL": {"--environment_type=EXTERNAL", "--environment_config=" + p.pool},
	}
}

// drive runs the dpsql-beam driver, as this test's user, in its own process,
// submitting to the job server with environment env.
func (p *portable) drive(t *testing.T, env string, args ...string) (int, string, string) {
	t.Helper()
	// The driver runs in the shared directory and names the staging
	// directory relative to it, as the avgmix test names its shards.
	args = append(args, "--runner=universal", "--endpoint="+p.endpoint, "--staging=staging")
	args = append(args, p.environments()[env]...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, portableBins.dpbeam, args...)
	cmd.Dir = p.shared
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running dpsql-beam %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// sharedFile writes a file the workers can read.
func (p *portable) sharedFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(p.shared, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPortableAvgmix releases avgmix from two CSV shards in-process (prism
// inside the driver) and then through the portable runner with PROCESS and
// EXTERNAL workers: each portable job charges exactly what the in-process
// job charged (the same mechanism and ledger details but for the job, the
// runner and the table), has its released outcome record, and releases T
// rows of d and K values with the law's mean.
func TestPortableAvgmix(t *testing.T) {
	p := startPortable(t)
	// Each job charges a database of its own: a charge's price composes the
	// scope's earlier subsampled charges, whose cost grows with them.
	path, db := initDB(t, 10)
	const perShard, T, m = 1500, 500, 20
	rows := genRows(2 * perShard)
	var files []string
	for s := range 2 {
		var b strings.Builder
		b.WriteString("f0,f1,label\n")
		for _, r := range rows[s*perShard : (s+1)*perShard] {
			fmt.Fprintf(&b, "%v,%v,%d\n", r.x[0], r.x[1], r.class)
		}
		files = append(files, p.sharedFile(t, fmt.Sprintf("train-%d.csv", s), b.String()))
	}
	args := func(into string) []string {
		return []string{"avgmix", "--db", path, "--into", into, "--mu", "1", "--n", fmt.Sprint(2 * perShard), "--T", fmt.Sprint(T),
			"--m", fmt.Sprint(m), "--classes", "2", "--csv", strings.Join(files, ",")}
	}
	code, _, errs := run(t, nil, args("inproc")...)
	if code != 0 {
		t.Fatalf("in-process: exit %d: %s", code, errs)
	}
	ref := ledgerRows(t, db)[0]
	auditVerify(t, path)
	for _, env := range []string{"PROCESS", "EXTERNAL"} {
		t.Run(env, func(t *testing.T) {
			into := "rel_" + strings.ToLower(env)
			path, db = initDB(t, 10)
			// The shards by names relative to the driver's directory,
			// which the workers do not share.
			a := args(into)
			for i := range a {
				if a[i] == "--csv" {
					a[i+1] = "train-0.csv,train-1.csv"
				}
			}
			code, out, errs := p.drive(t, env, a...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var sum avgmixSummary
			if err := json.Unmarshal([]byte(out), &sum); err != nil {
				t.Fatalf("summary %q: %v", out, err)
			}
			t.Logf("%s: %.1f s, of which the pipeline %.1f s", env, sum.Seconds, sum.PipelineSeconds)
			lr := ledgerRows(t, db)
			got := lr[len(lr)-1]
			if got.id != sum.LedgerID || got.params["job"] != sum.Job || got.params["runner"] != "universal" {
				t.Fatalf("the last charge %+v is not the job's (%+v)", got, sum)
			}
			if !reflect.DeepEqual(got.mechanism, ref.mechanism) {
				t.Fatalf("charged %+v, the in-process job %+v", got.mechanism, ref.mechanism)
			}
			for k, v := range ref.params {
				switch k {
				case "job", "runner", "into":
					continue
				}
				if fmt.Sprint(got.params[k]) != fmt.Sprint(v) {
					t.Errorf("ledger detail %s: %v, the in-process job's %v", k, got.params[k], v)
				}
			}
			if o := outcomes(t, db, sum.Job); len(o) != 1 || o[0] != (Outcome{Status: statusReleased, Charge: got.id, Into: into, Rows: T}) {
				t.Fatalf("outcome records %+v", o)
			}
			xs, ys := readRelease(t, db, into)
			if len(xs) != T || len(xs[0]) != 2 || len(ys[0]) != 2 {
				t.Fatalf("%d rows of %d and %d values, want %d of 2 and 2", len(xs), len(xs[0]), len(ys[0]), T)
			}
			// Each label coordinate's mean is its class's share (1/2), with
			// variance (q (1-q) n/2 + sigma_y^2) / m^2 per output.
			q := float64(m) / float64(2*perShard)
			v := (q*(1-q)*perShard + sum.SigmaY*sum.SigmaY) / (m * m)
			for c := range 2 {
				if mean, _ := moments(ys, c); math.Abs(mean-0.5) > 5*math.Sqrt(v/T) {
					t.Errorf("label %d: mean %.4f, want 0.5 (se %.4f)", c, mean, math.Sqrt(v/T))
				}
			}
			if env == "EXTERNAL" && !strings.Contains(p.poolLog.String(), "started, process") {
				t.Errorf("the worker pool started no worker:\n%s", p.poolLog.String())
			}
			auditVerify(t, path)
		})
	}
}

// TestPortableAggregate runs the ward statement over CSV shards through the
// portable runner with PROCESS and EXTERNAL workers: one charge, committed
// before the run, equal to protected mode's SQL charge for the statement
// (which is the in-process job's, TestAggregateShards), the released outcome
// record, and every ward within the noise of its exact bounded figures.
func TestPortableAggregate(t *testing.T) {
	p := startPortable(t)
	path, db := visitsSchema(t, t.TempDir(), 40, 1e-5)
	rows, want := visitRows(0)
	files := writeVisitsCSV(t, p.shared, rows, 3)
	for _, env := range []string{"PROCESS", "EXTERNAL"} {
		t.Run(env, func(t *testing.T) {
			into := "wards_" + strings.ToLower(env)
			before := len(ledgerRows(t, db))
			code, out, errs := p.drive(t, env, "aggregate", "--db", path, "--into", into, "--query", wardQuery,
				"--csv", strings.Join(files, ","))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var sum aggregateSummary
			if err := json.Unmarshal([]byte(out), &sum); err != nil {
				t.Fatalf("summary %q: %v", out, err)
			}
			lr := ledgerRows(t, db)
			if len(lr) != before+1 || lr[before].id != sum.LedgerID || lr[before].params["runner"] != "universal" {
				t.Fatalf("charges %+v after the job, want one more, the job's", lr)
			}
			checkWardsAgainstSQL(t, path, db, into, sum.Job, sum.LedgerID, want)
		})
	}
}

// TestPortableWorkersCannotOpenDB is the control of the isolation the
// TestPortable tests rely on: a statement over the rows of the database file
// itself (no shards), whose workers must open the file, fails through the
// portable runner, after the charge, with SQLite's refusal to open it,
// although the driver read the same file to plan and charge it.
func TestPortableWorkersCannotOpenDB(t *testing.T) {
	p := startPortable(t)
	path, db := initDB(t, 5)
	if _, err := db.Exec(`CREATE TABLE v (pid INTEGER, ward TEXT); INSERT INTO v VALUES (1, 'a'), (2, 'b');
		SELECT dp_protect('v', json_object('privacy_unit', 'pid'))`); err != nil {
		t.Fatal(err)
	}
	code, _, errs := p.drive(t, "PROCESS", "aggregate", "--db", path, "--into", "rel",
		"--query", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM v")
	if code != 1 || !strings.Contains(errs, "unable to open database file") || !strings.Contains(errs, "nothing was released") {
		t.Fatalf("exit %d, want 1 with SQLite's refusal to open the file: %s", code, errs)
	}
	lr := ledgerRows(t, db)
	if len(lr) != 1 {
		t.Fatalf("%d charges, want the failed job's one", len(lr))
	}
	job, _ := lr[0].params["job"].(string)
	if o := outcomes(t, db, job); len(o) != 1 || o[0].Status != statusFailed {
		t.Fatalf("outcome records %+v", o)
	}
	if hasTable(t, db, "rel") {
		t.Fatal("a failed job left a release table")
	}
}
