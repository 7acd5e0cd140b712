package devrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batchwork/batchwork/internal/emulator"
)

// batchworkModule is this module's path: the module whose directory may
// hold the emulator's servers (a checkout where they were installed).
const batchworkModule = "github.com/batchwork/batchwork"

// FindServers points the emulator at moto and DynamoDB Local, looking
// beside the user's module, in the Batchwork module it requires and in
// $XDG_CACHE_HOME/batchwork, through this process's environment; it fails
// with how to install what is missing. Variables the user set, and an
// endpoint in AWS_ENDPOINT_URL, win.
func FindServers(ctx context.Context) error {
	return findEmulatorServers(os.Getenv, os.Setenv, emulatorSearch(ctx, os.Getenv))
}

// serverSearch is where findEmulatorServers looks: dirs in order, of
// which modDir is the Batchwork module's and cache the install directory.
type serverSearch struct {
	dirs          []string
	modDir, cache string
}

// emulatorSearch looks beside the user's module (the emulator's own
// lookup, kept first), in the directory of the Batchwork module it
// requires (a replace's checkout, where `make venv dynamodb-local` may
// have run), and in $XDG_CACHE_HOME/batchwork.
func emulatorSearch(ctx context.Context, getenv func(string) string) serverSearch {
	var s serverSearch
	if wd, err := os.Getwd(); err == nil {
		s.dirs = append(s.dirs, moduleRoot(wd))
	}
	if s.modDir = batchworkModuleDir(ctx); s.modDir != "" {
		s.dirs = append(s.dirs, s.modDir)
	}
	cache := getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		s.cache = filepath.Join(cache, "batchwork")
		s.dirs = append(s.dirs, s.cache)
	}
	return s
}

// findEmulatorServers points the emulator at moto and DynamoDB Local,
// which its own lookup (beside the nearest go.mod: the user's module)
// would not find, by setting the emulator's variables through setenv; it
// fails with how to install what is missing. Variables the user set, and
// an endpoint in AWS_ENDPOINT_URL, win.
func findEmulatorServers(getenv func(string) string, setenv func(k, v string) error, s serverSearch) error {
	if getenv(emulator.EnvEndpointURL) != "" || (getenv(emulator.EnvEmulator) != "" && getenv(emulator.EnvEmulator) != emulator.KindMoto) {
		return nil
	}
	needMoto := getenv(emulator.EnvMotoServer) == ""
	needDynamo := getenv(emulator.EnvDynamoDBLocalDir) == "" && getenv(emulator.EnvEndpointURLDynamoDB) == "" &&
		getenv(emulator.EnvDynamoDB) != emulator.DynamoDBMoto
	var missing []string
	if needMoto {
		if p := firstExisting(s.dirs, func(d string) string { return filepath.Join(d, ".venv", "bin", "moto_server") }); p != "" {
			if err := setenv(emulator.EnvMotoServer, p); err != nil {
				return err
			}
		} else {
			missing = append(missing, "moto")
		}
	}
	if needDynamo {
		has := func(d string) string {
			lib := filepath.Join(d, ".dynamodb-local", "lib")
			if m, _ := filepath.Glob(filepath.Join(lib, "DynamoDBLocal-*.jar")); len(m) > 0 {
				return lib
			}
			return ""
		}
		if p := firstExisting(s.dirs, has); p != "" {
			if err := setenv(emulator.EnvDynamoDBLocalDir, p); err != nil {
				return err
			}
		} else {
			missing = append(missing, "DynamoDB Local")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return emulatorInstallError(missing, s.dirs, s.modDir, s.cache)
}

// emulatorInstallError says how to install the missing servers into the
// cache directory, from the Batchwork module's pinned versions.
func emulatorInstallError(missing, dirs []string, modDir, cache string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s not found (looked in %s). Install into %s:\n", strings.Join(missing, " and "), strings.Join(dirs, ", "), cache)
	src := modDir
	if src == "" {
		src = "<the Batchwork module's directory: go list -m -f '{{.Dir}}' " + batchworkModule + ">"
	}
	if slices.Contains(missing, "moto") {
		fmt.Fprintf(&b, "  python3 -m venv %s/.venv && %s/.venv/bin/pip install -r %s/internal/emulator/requirements.txt\n", cache, cache, src)
	}
	if slices.Contains(missing, "DynamoDB Local") {
		fmt.Fprintf(&b, "  mvn -q -f %s/internal/emulator/pom.xml dependency:copy-dependencies -DoutputDirectory=%s/.dynamodb-local/lib   # Maven and Java 17\n", src, cache)
		fmt.Fprintf(&b, "  (or use moto's own DynamoDB: %s=%s)\n", emulator.EnvDynamoDB, emulator.DynamoDBMoto)
	}
	fmt.Fprintf(&b, "or point %s at a running emulator", emulator.EnvEndpointURL)
	return errors.New(b.String())
}

func firstExisting(dirs []string, find func(dir string) string) string {
	for _, d := range dirs {
		if p := find(d); p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return ""
}

// moduleRoot is the directory of the nearest go.mod at or above dir (dir
// itself when there is none).
func moduleRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// batchworkModuleDir is the directory of the Batchwork module the working
// directory's module builds with ("" if go cannot say).
func batchworkModuleDir(ctx context.Context) string {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", batchworkModule)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return ""
	}
	return strings.TrimSpace(out.String())
}
