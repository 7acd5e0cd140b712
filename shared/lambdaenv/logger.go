package lambdaenv

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/batchwork/batchwork/shared/lazylog"
)

// EnvLogLevel sets the log level of every Batchwork process: debug, info
// (the default), warn or error. Debug adds a line per task message handled
// (its action and why), for chasing a slow recovery or a bounced message.
const EnvLogLevel = "BATCHWORK_LOG_LEVEL"

// NewLogger returns a JSON logger on w at the level EnvLogLevel names.
func NewLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if v := os.Getenv(EnvLogLevel); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("%s=%q: want debug, info, warn or error", EnvLogLevel, v)
		}
	}
	// Per-task loggers format their attributes only if they log.
	return lazylog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})), nil
}
