package devrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/provision"
	"github.com/batchwork/batchwork/shared/runner"
)

// TestFindEmulatorServers: dev finds moto and DynamoDB Local in the
// search directories in order, leaves alone what the user set, and
// without them fails saying how to install them.
func TestFindEmulatorServers(t *testing.T) {
	install := func(dir string, moto, dynamo bool) string {
		if moto {
			p := filepath.Join(dir, ".venv", "bin", "moto_server")
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
		}
		if dynamo {
			p := filepath.Join(dir, ".dynamodb-local", "lib", "DynamoDBLocal-2.5.jar")
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.WriteFile(p, nil, 0o644)
		}
		return dir
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		// which of user, module and cache dirs hold moto and DynamoDB Local
		user, mod, cache [2]bool
		want             map[string]string // dir names: "user", "mod", "cache"
		err              []string
	}{
		{name: "beside the user's module first", user: [2]bool{true, true}, mod: [2]bool{true, true},
			want: map[string]string{emulator.EnvMotoServer: "user", emulator.EnvDynamoDBLocalDir: "user"}},
		{name: "the batchwork module's", mod: [2]bool{true, true}, cache: [2]bool{true, true},
			want: map[string]string{emulator.EnvMotoServer: "mod", emulator.EnvDynamoDBLocalDir: "mod"}},
		{name: "the cache", mod: [2]bool{true, false}, cache: [2]bool{false, true},
			want: map[string]string{emulator.EnvMotoServer: "mod", emulator.EnvDynamoDBLocalDir: "cache"}},
		{name: "moto's DynamoDB needs no DynamoDB Local", env: map[string]string{emulator.EnvDynamoDB: "moto"}, cache: [2]bool{true, false},
			want: map[string]string{emulator.EnvMotoServer: "cache"}},
		{name: "the user's settings win", env: map[string]string{emulator.EnvMotoServer: "/opt/moto"}, cache: [2]bool{true, true},
			want: map[string]string{emulator.EnvDynamoDBLocalDir: "cache"}},
		{name: "an endpoint needs neither", env: map[string]string{emulator.EnvEndpointURL: "http://127.0.0.1:4566"}, want: map[string]string{}},
		{name: "nothing installed",
			err: []string{"moto and DynamoDB Local not found", "pip install -r MOD/internal/emulator/requirements.txt",
				"-DoutputDirectory=CACHE/.dynamodb-local/lib", emulator.EnvDynamoDB + "=moto", emulator.EnvEndpointURL}},
		{name: "only DynamoDB Local missing", user: [2]bool{true, false},
			err: []string{"DynamoDB Local not found", "mvn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dirs := map[string]string{}
			for name, has := range map[string][2]bool{"user": tc.user, "mod": tc.mod, "cache": tc.cache} {
				dirs[name] = install(filepath.Join(root, name), has[0], has[1])
			}
			s := serverSearch{dirs: []string{dirs["user"], dirs["mod"], dirs["cache"]}, modDir: dirs["mod"], cache: dirs["cache"]}
			set := map[string]string{}
			err := findEmulatorServers(func(k string) string { return tc.env[k] },
				func(k, v string) error { set[k] = v; return nil }, s)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("no error; set %v", set)
				}
				msg := strings.NewReplacer(dirs["mod"], "MOD", dirs["cache"], "CACHE").Replace(err.Error())
				for _, w := range tc.err {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q lacks %q", msg, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, where := range tc.want {
				if !strings.HasPrefix(set[k], dirs[where]+string(filepath.Separator)) {
					t.Errorf("%s = %q, want under %s", k, set[k], where)
				}
			}
			if len(set) != len(tc.want) {
				t.Errorf("set %v, want only %v", set, tc.want)
			}
		})
	}
}

// TestExecutorEnv: dev's executor gets the runner's resources on the
// emulator, the emulator's dummy credentials and the programs directory,
// never the user's AWS or other Batchwork settings.
func TestExecutorEnv(t *testing.T) {
	r := &runner.Runner{Resources: provision.Resources{Table: "T", Bucket: "B",
		Queues: control.Queues{High: "qh", Normal: "qn", Low: "ql", DLQ: "qd"}}}
	emu := &emulator.Emulator{URL: "http://127.0.0.1:1", DynamoURL: "http://127.0.0.1:2", Region: "eu-west-1"}
	env := executorEnv([]string{"HOME=/home/u", "AWS_PROFILE=prod", "AWS_SECRET_ACCESS_KEY=real", "BATCHWORK_ENDPOINT=https://x", "AWS_SESSION_TOKEN=tok",
		"BATCHWORK_EXEC_DIR=/elsewhere"}, r, emu, "/abs/programs")
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{
		"HOME": "/home/u", "BATCHWORK_TABLE": "T", "BATCHWORK_BUCKET": "B", "BATCHWORK_QUEUE_HIGH": "qh",
		"BATCHWORK_QUEUE_NORMAL": "qn", "BATCHWORK_QUEUE_LOW": "ql", "BATCHWORK_DLQ": "qd", "BATCHWORK_SLOTS": "4",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "eu-west-1",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:2",
		// The programs directory dev resolved (devExecDir), so exec stages run.
		"BATCHWORK_EXEC_DIR": "/abs/programs",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN", "BATCHWORK_ENDPOINT"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s passed to the executor", k)
		}
	}
}
