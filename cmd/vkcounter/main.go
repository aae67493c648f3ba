// Command vkcounter is a VK community bot that answers every message with
// how many times the same message was received in the last 24 hours, and a
// counter server speaking the yrmcds counter protocol.
//
// Usage:
//
//	vkcounter [serve] [flags]   run the service (the default)
//	vkcounter cnt …             talk to a counter port, like yc-cnt
//	vkcounter loadtest …        simulate traffic and check every answer
//	vkcounter setup -url …      register the Callback server with VK
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, getenv, stdout, stderr)
	case "cnt":
		return runCnt(ctx, args, stdout, stderr)
	case "loadtest":
		return runLoadtest(ctx, args, stdout, stderr)
	case "setup":
		return runSetup(ctx, args, getenv, stdout, stderr)
	case "help":
		fmt.Fprintln(stdout, "usage: vkcounter [serve|cnt|loadtest|setup] [flags]; vkcounter serve -help lists every setting")
		return 0
	}
	fmt.Fprintf(stderr, "vkcounter: unknown command %q (serve, cnt, loadtest, setup, help)\n", cmd)
	return 2
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stdout)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "vkcounter:", err)
		return 2
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "vkcounter:", err)
		return 2
	}
	m := NewMain(cfg, log)
	if err := m.Run(ctx); err != nil {
		log.Error().Err(err).Msg("cannot start")
		return 1
	}
	<-ctx.Done()
	log.Info().Stringer("timeout", cfg.ShutdownTimeout).Msg("shutting down")
	if err := m.Close(); err != nil {
		log.Error().Err(err).Msg("shutdown incomplete")
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}

func newLogger(cfg Config, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		return zerolog.Logger{}, fmt.Errorf("LOG_LEVEL %q: want trace, debug, info, warn or error", cfg.LogLevel)
	}
	if cfg.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}
