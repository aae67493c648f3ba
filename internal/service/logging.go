package service

import (
	stdlog "log"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/ratelog"
)

// FailureLogEvery is how often a repeated failure line may be logged.
const FailureLogEvery = 10 * time.Second

// serverErrorLog is an http.Server's ErrorLog writing into the service's
// log: each line a warning naming the server (env), at most one per
// FailureLogEvery, so that a failing accept (too many open files) keeps a
// JSON log JSON and does not flood it.
func serverErrorLog(log zerolog.Logger, env string) *stdlog.Logger {
	return stdlog.New(serverLogWriter{ratelog.New(log.With().Str("server", env).Logger(), FailureLogEvery)}, "", 0)
}

type serverLogWriter struct{ log *ratelog.Logger }

func (w serverLogWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
