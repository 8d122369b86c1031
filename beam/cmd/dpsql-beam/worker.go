package main

// Worker processes for portable runners (Flink, Spark, Dataflow, prism as a
// job server). A portable runner does not run the pipeline's DoFns itself: it
// asks an SDK environment for worker processes and talks to them over the
// Fn API. dpsql-beam is its own environment, in three ways:
//
//   - as Beam's worker (--worker, with --id, --control_endpoint and
//     --logging_endpoint): Beam's harness serves the DoFns (beam.Init);
//   - as a boot loader (--id and --provision_endpoint, what a runner's
//     PROCESS environment and a worker pool start): it asks the runner's
//     provision service for the endpoints and the pipeline options, checks
//     that the job's staged worker binary is this very binary (the DoFns it
//     registers must be the driver's), and replaces itself with a worker;
//   - as a worker pool (dpsql-beam worker-pool, the EXTERNAL environment):
//     it starts a boot loader process, this binary, for each worker the
//     runner asks for.
//
// Beam's own Go container does the same with a separate boot binary that
// downloads the staged worker; dpsql-beam runs itself instead, so a worker
// host needs only the dpsql-beam binary the driver ran.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// isBootArgs reports whether args (without the program name) are a boot
// loader's: a runner's PROCESS environment or a worker pool passes --id and
// --provision_endpoint, and no --worker.
func isBootArgs(args []string) bool {
	var prov, worker bool
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "provision_endpoint":
			prov = true
		case "worker":
			worker = true
		}
	}
	return prov && !worker
}

// boot turns this process into a Beam worker for the runner at
// --provision_endpoint; it returns only on failure.
func boot(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("dpsql-beam (boot)", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "worker id")
	provision := fs.String("provision_endpoint", "", "the runner's provision service")
	logging := fs.String("logging_endpoint", "", "the runner's logging service (default from provisioning)")
	control := fs.String("control_endpoint", "", "the runner's control service (default from provisioning)")
	fs.String("artifact_endpoint", "", "the runner's artifact service (unused: this binary is the worker)")
	semi := fs.String("semi_persist_dir", os.TempDir(), "a directory for the worker's files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// prism (2.77.0) quotes the id as a shell would, but starts the command
	// without a shell: the quotes arrive as part of the id.
	wid := strings.Trim(*id, "'")
	if wid == "" || *provision == "" {
		return errors.New("a worker needs --id and --provision_endpoint")
	}
	ctx := grpcx.WriteWorkerID(context.Background(), wid)
	info, err := tools.ProvisionInfo(ctx, *provision)
	if err != nil {
		return fmt.Errorf("asking the runner at %s for the job: %w", *provision, err)
	}
	if u := info.GetLoggingEndpoint().GetUrl(); u != "" {
		*logging = u
	}
	if u := info.GetControlEndpoint().GetUrl(); u != "" {
		*control = u
	}
	if *logging == "" || *control == "" {
		return errors.New("the runner gave no control or logging endpoint")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := checkStagedWorker(info.GetDependencies(), self); err != nil {
		return err
	}
	opts, err := tools.ProtoToJSON(info.GetPipelineOptions())
	if err != nil {
		return fmt.Errorf("the job's pipeline options: %w", err)
	}
	// The options go on the command line (Beam's boot loader writes a file,
	// which a process that replaces itself could not remove).
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PIPELINE_OPTIONS_FILE=") {
			env = append(env, kv)
		}
	}
	if u := info.GetStatusEndpoint().GetUrl(); u != "" {
		env = append(env, "STATUS_ENDPOINT="+u)
	}
	if c := info.GetRunnerCapabilities(); len(c) > 0 {
		env = append(env, "RUNNER_CAPABILITIES="+strings.Join(c, " "))
	}
	argv := []string{self, "--worker=true", "--id=" + wid, "--logging_endpoint=" + *logging,
		"--control_endpoint=" + *control, "--semi_persist_dir=" + *semi, "--options=" + opts}
	return syscall.Exec(self, argv, env)
}

// checkStagedWorker refuses to serve a job whose staged Go worker binary is
// not this binary: the driver's DoFns are known to the worker by the names
// its binary registered, and a different build could run different code
// under the same names. A job that staged no file artifact is refused too.
func checkStagedWorker(deps []*pipepb.ArtifactInformation, self string) error {
	want := ""
	for _, d := range deps {
		if d.GetTypeUrn() != "beam:artifact:type:file:v1" {
			continue
		}
		var p pipepb.ArtifactFilePayload
		if err := proto.Unmarshal(d.GetTypePayload(), &p); err != nil {
			return fmt.Errorf("the job's staged worker: %w", err)
		}
		if want == "" || d.GetRoleUrn() == "beam:artifact:role:go_worker_binary:v1" {
			want = p.GetSha256()
		}
	}
	if want == "" {
		return errors.New("the job staged no worker binary to compare with this one")
	}
	f, err := os.Open(self)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("the job was submitted with another worker binary (sha256 %s) than this dpsql-beam (%s): "+
			"run the same dpsql-beam build on the workers as on the driver", want, got)
	}
	return nil
}

// workerPool is Beam's external worker pool service: for each worker the
// runner asks for, it starts this binary as a boot loader, in its own
// process.
type workerPool struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer

	self   string
	stderr io.Writer

	mu      sync.Mutex
	workers map[string]*exec.Cmd
}

func (p *workerPool) StartWorker(_ context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	id := req.GetWorkerId()
	if id == "" || req.GetProvisionEndpoint().GetUrl() == "" {
		return &fnpb.StartWorkerResponse{Error: "a worker needs an id and a provision endpoint"}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workers == nil {
		return &fnpb.StartWorkerResponse{Error: "the worker pool is shutting down"}, nil
	}
	if _, ok := p.workers[id]; ok {
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("worker %q already exists", id)}, nil
	}
	args := []string{"--id=" + id, "--provision_endpoint=" + req.GetProvisionEndpoint().GetUrl()}
	for _, e := range []struct{ name, url string }{
		{"control_endpoint", req.GetControlEndpoint().GetUrl()},
		{"logging_endpoint", req.GetLoggingEndpoint().GetUrl()},
	} {
		if e.url != "" {
			args = append(args, "--"+e.name+"="+e.url)
		}
	}
	cmd := exec.Command(p.self, args...)
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("starting worker %q: %v", id, err)}, nil
	}
	p.workers[id] = cmd
	fmt.Fprintf(p.stderr, "dpsql-beam worker-pool: worker %s started, process %d\n", id, cmd.Process.Pid)
	go func() {
		cmd.Wait()
		p.mu.Lock()
		if p.workers[id] == cmd {
			delete(p.workers, id)
		}
		p.mu.Unlock()
	}()
	return &fnpb.StartWorkerResponse{}, nil
}

func (p *workerPool) StopWorker(_ context.Context, req *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cmd, ok := p.workers[req.GetWorkerId()]; ok {
		cmd.Process.Kill()
		delete(p.workers, req.GetWorkerId())
	}
	return &fnpb.StopWorkerResponse{}, nil
}

// stopAll kills every worker and refuses new ones.
func (p *workerPool) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cmd := range p.workers {
		cmd.Process.Kill()
	}
	p.workers = nil
}

// runWorkerPool serves the worker pool until interrupted.
func (m *Main) runWorkerPool(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("dpsql-beam worker-pool", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	listen := fs.String("listen", "localhost:50000", "the address to serve Beam's worker pool service on "+
		"(give it to the driver as --environment_config; whoever reaches it can run this binary's DoFns "+
		"on the files this host can read, so keep it on a private network)")
	fs.Usage = func() {
		fmt.Fprint(m.Stderr, "Usage: dpsql-beam worker-pool [--listen HOST:PORT]\n\n"+
			"Serves Beam's external worker pool: a portable runner started with --environment_type=EXTERNAL\n"+
			"--environment_config=HOST:PORT asks it for workers, and it starts each as a process of this binary.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "dpsql-beam worker-pool: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(m.Stderr, "dpsql-beam worker-pool: %v\n", err)
		return 1
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(m.Stderr, "dpsql-beam worker-pool: %v\n", err)
		return 1
	}
	pool := &workerPool{self: self, stderr: m.Stderr, workers: map[string]*exec.Cmd{}}
	srv := grpc.NewServer()
	fnpb.RegisterBeamFnExternalWorkerPoolServer(srv, pool)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		pool.stopAll()
		srv.Stop()
	}()
	// The address line is for people and scripts (a test reads it).
	fmt.Fprintf(m.Stdout, "dpsql-beam worker pool serving on %s\n", lis.Addr())
	if err := srv.Serve(lis); err != nil && ctx.Err() == nil {
		fmt.Fprintf(m.Stderr, "dpsql-beam worker-pool: %v\n", err)
		return 1
	}
	return 0
}
