package batchwork_test

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/batchwork"
)

// builtStack synthesizes props into a fresh output directory and returns
// the template and the directory (where the staged assets are).
func builtStack(t *testing.T, props batchwork.Props) (tmpl, string) {
	t.Helper()
	out, err := tempDir("batchwork-build-synth-")
	if err != nil {
		t.Fatal(err)
	}
	if props.DockerContext == "" {
		props.DockerContext = fakeDockerContext(t)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	stack := awscdk.NewStack(app, jsii.String("Build"), nil)
	batchwork.NewBatchwork(stack, "Batchwork", &props)
	app.Synth(nil)
	raw, err := os.ReadFile(filepath.Join(out, "Build.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tp tmpl
	if err := json.Unmarshal(raw, &tp); err != nil {
		t.Fatal(err)
	}
	return tp, out
}

// function finds the function whose logical id starts with id (the
// construct's ids: Api, Sweep, Executor, ...).
func function(t *testing.T, tp tmpl, id string) resource {
	t.Helper()
	for logical, r := range tp.Resources {
		if r.Type == "AWS::Lambda::Function" && strings.HasPrefix(logical, "Batchwork"+id) && !strings.Contains(logical[len("Batchwork"+id):], "Role") {
			return r
		}
	}
	t.Fatalf("no %s function in the template", id)
	return resource{}
}

// bootstrap reads the bootstrap of a function's staged asset.
func bootstrap(t *testing.T, out string, fn resource) []byte {
	t.Helper()
	code, _ := fn.Properties["Code"].(map[string]any)
	key, _ := code["S3Key"].(string)
	hash := strings.TrimSuffix(key, ".zip")
	if hash == "" {
		t.Fatalf("function code %v has no asset key", code)
	}
	b, err := os.ReadFile(filepath.Join(out, "asset."+hash, "bootstrap"))
	if err != nil {
		t.Fatalf("staged asset: %v", err)
	}
	return b
}

// isLambdaBinary reports whether b is a linux/arm64 executable, what
// provided.al2023 on arm64 runs.
func isLambdaBinary(b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	if f.Machine != elf.EM_AARCH64 {
		return fmt.Errorf("built for %v, want EM_AARCH64", f.Machine)
	}
	return nil
}

func envOf(fn resource) map[string]any {
	env, _ := fn.Properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

// TestExecutorPackage: the user's executor package is built for Lambda at
// synth time and is the executor's code; its task names reach the
// submitting functions (and only them); without a prebuilt bin directory
// the control plane's functions are built from their packages.
func TestExecutorPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go binaries")
	}
	fake := "#!/bin/sh\n" // fakeBins' stand-in bootstrap
	for _, tc := range []struct {
		name  string
		props func() batchwork.Props
		// names is the api and sweep functions' BATCHWORK_TASK_NAMES
		// ("": not set).
		names string
		// builtExecutor: the executor's code is testdata/executor, built;
		// builtControl: the api's code is functions/api, built.
		builtExecutor, builtControl bool
	}{
		{name: "package and no bin directory",
			props: func() batchwork.Props {
				return batchwork.Props{BinDir: t.TempDir(), ExecutorPackage: "./testdata/executor"}
			},
			names: "testdata.lower,testdata.upper", builtExecutor: true, builtControl: true},
		{name: "package beside prebuilt functions",
			props: func() batchwork.Props {
				return batchwork.Props{BinDir: fakeBins(t), ExecutorPackage: "./testdata/executor"}
			},
			names: "testdata.lower,testdata.upper", builtExecutor: true},
		{name: "names given, no package",
			props: func() batchwork.Props {
				return batchwork.Props{BinDir: fakeBins(t), TaskNames: []string{"b.two", "a.one", "b.two"}}
			},
			names: "a.one,b.two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, out := builtStack(t, tc.props())
			for _, id := range []string{"Api", "Sweep", "Executor"} {
				got, _ := envOf(function(t, tp, id))[batchwork.EnvTaskNames].(string)
				want := tc.names
				if id == "Executor" {
					want = "" // the executor knows its own names
				}
				if got != want {
					t.Errorf("%s function: %s = %q, want %q", id, batchwork.EnvTaskNames, got, want)
				}
			}
			exec := bootstrap(t, out, function(t, tp, "Executor"))
			if tc.builtExecutor {
				if err := isLambdaBinary(exec); err != nil {
					t.Errorf("executor bootstrap: %v", err)
				}
				if !bytes.Contains(exec, []byte("testdata.upper")) {
					t.Error("executor bootstrap is not testdata/executor")
				}
			} else if string(exec) != fake {
				t.Errorf("executor bootstrap is not BinDir's (%d bytes)", len(exec))
			}
			api := bootstrap(t, out, function(t, tp, "Api"))
			if tc.builtControl {
				if err := isLambdaBinary(api); err != nil {
					t.Errorf("api bootstrap: %v", err)
				}
			} else if string(api) != fake {
				t.Errorf("api bootstrap is not BinDir's (%d bytes)", len(api))
			}
		})
	}
}

// TestExecutorPackageErrors: an executor that cannot be built or does not
// list its tasks stops the synth with an error that says which and why.
func TestExecutorPackageErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go binaries")
	}
	// Neither a package nor names: no job could ever start (the api
	// refuses unknown names, and nothing has published any).
	func() {
		defer func() {
			if msg := fmt.Sprint(recover()); !strings.Contains(msg, "set ExecutorPackage") {
				t.Errorf("synth without task names: panic %q, want one naming ExecutorPackage and TaskNames", msg)
			}
		}()
		builtStack(t, batchwork.Props{BinDir: fakeBins(t)})
	}()
	for _, tc := range []struct{ pkg, want string }{
		{"./testdata/nosuchpackage", "testdata/nosuchpackage"},
		{"./testdata/notanexecutor", "not a JSON array of task names"},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			var got any
			func() {
				defer func() { got = recover() }()
				builtStack(t, batchwork.Props{BinDir: fakeBins(t), ExecutorPackage: tc.pkg})
			}()
			msg := fmt.Sprint(got)
			if got == nil || !strings.Contains(msg, tc.want) {
				t.Errorf("synth with ExecutorPackage %s: panic %q, want one containing %q", tc.pkg, msg, tc.want)
			}
		})
	}
}

// TestFargateImage: the Fargate executor runs the image given (one built
// and pushed elsewhere), else one built from DockerContext's Dockerfile
// at deploy time.
func TestFargateImage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		image awsecs.ContainerImage
		// want is the container's image: a registry reference, or an
		// asset's (a Fn::Sub into the stack's asset repository).
		want func(any) bool
	}{
		{"registry image", awsecs.ContainerImage_FromRegistry(jsii.String("123456789012.dkr.ecr.eu-west-1.amazonaws.com/exec:v3"), nil),
			func(v any) bool { return v == "123456789012.dkr.ecr.eu-west-1.amazonaws.com/exec:v3" }},
		{"Dockerfile directory", nil,
			func(v any) bool {
				m, ok := v.(map[string]any)
				return ok && strings.Contains(fmt.Sprint(m["Fn::Sub"]), "container-assets")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, _ := builtStack(t, batchwork.Props{BinDir: fakeBins(t), Executor: batchwork.ExecutorFargate, FargateImage: tc.image, TaskNames: []string{"a.b"}})
			var images []any
			for _, r := range tp.Resources {
				if r.Type != "AWS::ECS::TaskDefinition" {
					continue
				}
				defs, _ := r.Properties["ContainerDefinitions"].([]any)
				for _, d := range defs {
					images = append(images, d.(map[string]any)["Image"])
				}
			}
			if len(images) != 1 || !tc.want(images[0]) {
				t.Errorf("container images %v", images)
			}
		})
	}
}

// TestFargateBuildArgs: the image built from DockerContext gets the build
// arguments given (the repository's Dockerfile picks Python with
// RUNTIME=python), and none when none are given.
func TestFargateBuildArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args map[string]string
	}{
		{"none", nil},
		{"python", map[string]string{"RUNTIME": "python"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out := builtStack(t, batchwork.Props{BinDir: fakeBins(t), Executor: batchwork.ExecutorFargate,
				FargateBuildArgs: tc.args, TaskNames: []string{"a.b"}})
			raw, err := os.ReadFile(filepath.Join(out, "Build.assets.json"))
			if err != nil {
				t.Fatal(err)
			}
			var manifest struct {
				DockerImages map[string]struct {
					Source struct {
						DockerBuildArgs map[string]string `json:"dockerBuildArgs"`
					} `json:"source"`
				} `json:"dockerImages"`
			}
			if err := json.Unmarshal(raw, &manifest); err != nil {
				t.Fatal(err)
			}
			if len(manifest.DockerImages) != 1 {
				t.Fatalf("%d docker images, want 1", len(manifest.DockerImages))
			}
			for _, img := range manifest.DockerImages {
				if len(img.Source.DockerBuildArgs) != len(tc.args) || img.Source.DockerBuildArgs["RUNTIME"] != tc.args["RUNTIME"] {
					t.Errorf("build args %v, want %v", img.Source.DockerBuildArgs, tc.args)
				}
			}
		})
	}
}
