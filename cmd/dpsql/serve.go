package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/dpsql/dpsql/serve"
	"github.com/spf13/cobra"
)

func (m *Main) newServeCmd() *cobra.Command {
	var listen, certFile, keyFile string
	var cfg serve.Config
	cmd := &cobra.Command{
		Use:   "serve DB",
		Short: "Serve DB to analysts over HTTP: accounts, DP queries, a web page (owner only)",
		Long: `Run the analyst service of DB: analysts reach it with the bearer token of an
account (dpsql analyst add) and never hold the file. POST /v1/query runs one
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY on protected tables, charged to the
account's scope; a plain SELECT on public tables); GET /v1/budget and
GET /v1/ledger show the account's own scope, GET /v1/tables what it may
query (the protected tables and their policies, the public tables); / is a
web page for analysts.
The service listens on loopback unless told otherwise; any other address needs
TLS (--tls-cert and --tls-key). Ctrl-C stops it. The repository's docs/service.md
documents the API and the threat model.`,
		Example: `  dpsql serve clinic.db
  dpsql serve clinic.db --listen 0.0.0.0:8642 --tls-cert cert.pem --tls-key key.pem`,
		Args: nargs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (certFile == "") != (keyFile == "") {
				return usagef("give both --tls-cert and --tls-key, or neither")
			}
			tls := certFile != ""
			if !tls && !isLoopback(listen) {
				return usagef("--listen %s is not a loopback address: serving tokens and answers beyond this machine needs TLS (--tls-cert FILE --tls-key FILE)", listen)
			}
			if _, err := os.Stat(args[0]); err != nil {
				return fmt.Errorf("no database file at %s: %w", args[0], err)
			}
			abs, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg.Path = abs
			srv, err := serve.New(ctx, cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", listen, err)
			}
			hs := &http.Server{
				Handler:           srv.Handler(),
				ReadHeaderTimeout: 10 * time.Second,
				ReadTimeout:       time.Minute,
				WriteTimeout:      cfg.StatementTimeout + time.Minute,
				IdleTimeout:       2 * time.Minute,
				MaxHeaderBytes:    16 << 10,
			}
			scheme := "http"
			if tls {
				scheme = "https"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dpsql serve: %s on %s://%s/ (%d active accounts; Ctrl-C stops)\n", args[0], scheme, ln.Addr(), srv.ActiveAccounts())
			done := make(chan error, 1)
			go func() {
				if tls {
					done <- hs.ServeTLS(ln, certFile, keyFile)
				} else {
					done <- hs.Serve(ln)
				}
			}()
			select {
			case err := <-done:
				return fmt.Errorf("serving: %w", err)
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := hs.Shutdown(sctx); err != nil {
				return fmt.Errorf("stopping: %w", err)
			}
			if err := <-done; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "dpsql serve: stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8642", "address to listen on; other than loopback needs --tls-cert and --tls-key")
	cmd.Flags().StringVar(&certFile, "tls-cert", "", "TLS certificate file (PEM)")
	cmd.Flags().StringVar(&keyFile, "tls-key", "", "TLS private key file (PEM)")
	cmd.Flags().Float64Var(&cfg.Rate, "rate", 10, "requests per second per account (token bucket)")
	cmd.Flags().IntVar(&cfg.Burst, "burst", 20, "burst of requests per account")
	cmd.Flags().Int64Var(&cfg.MaxBodyBytes, "max-body", 64<<10, "largest request body in bytes")
	cmd.Flags().IntVar(&cfg.MaxRows, "max-rows", 10000, "most rows in one answer")
	cmd.Flags().DurationVar(&cfg.StatementTimeout, "timeout", 30*time.Second, "stop a statement after this long (a DP statement already accepted keeps its charge)")
	return cmd
}

// isLoopback reports whether a listen address stays on this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
