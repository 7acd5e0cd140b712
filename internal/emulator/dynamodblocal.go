package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

const dynamoLocalHint = "run `make dynamodb-local` (needs Maven and Java 17) in the repository root, or set " +
	EnvDynamoDB + "=moto to use moto's DynamoDB"

const (
	// dynamoLocalMain is DynamoDB Local's entry point (the jar's Main-Class).
	dynamoLocalMain = "software.amazon.dynamodb.services.local.main.ServerRunner"
	// A JVM on a loaded 2-core machine can take a while.
	dynamoLocalStartTimeout = time.Minute
	// dynamoLocalPortAttempts bounds the retries when the free port picked
	// for it was taken before it could bind (see startDynamoLocal).
	dynamoLocalPortAttempts = 3
)

// startDynamoLocal starts DynamoDB Local on a free port, reached on
// 127.0.0.1, and waits until it answers ListTables. It runs in memory with
// one database for all credentials and regions (-sharedDb), so every
// client of the emulator sees the same tables, and sends no telemetry.
//
// Unlike moto, it cannot be handed a listening socket, so the port is
// picked, released and then bound by the JVM. If another process takes it
// in between, the server exits with a bind error and another port is
// tried; a health check cannot be answered by some other server, since it
// is a DynamoDB ListTables call and the process must still be running.
//
// DynamoDB Local has no option for its listen address: it binds all
// interfaces, not just loopback (it holds only test data, in memory).
func startDynamoLocal(ctx context.Context, logDir string, peak bool) (*process, string, error) {
	lib, err := findDynamoLocal()
	if err != nil {
		return nil, "", err
	}
	java, err := findJava()
	if err != nil {
		return nil, "", err
	}
	for attempt := 1; ; attempt++ {
		p, url, err := startDynamoLocalOnce(ctx, java, lib, logDir, peak)
		if !errors.Is(err, errPortTaken) || attempt == dynamoLocalPortAttempts {
			return p, url, err
		}
	}
}

// leanJVM are the JVM flags DynamoDB Local runs with unless its peak rate
// is asked for (Options.DynamoPeak). The tests keep a few servers busy on
// two cores, where CPU decides the time: the C1 compiler alone and the
// serial collector take about 40% less CPU a request (an empty Query on
// the sweep's index: 1.5 against 2.5 to 2.8 ms, GetItem 0.9 to 1.1
// against 1.2 to 1.9), while
// the default tiered JIT keeps C2 compiling in the background for minutes
// and G1's threads busy, at 10 to 20% more time a request.
var leanJVM = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}

// dynamoLocalArgs is DynamoDB Local's java command line.
func dynamoLocalArgs(lib string, port int, peak bool) []string {
	var args []string
	if !peak {
		args = append(args, leanJVM...)
	}
	// The native sqlite4java library sits beside the jars under its
	// versioned Maven name, which sqlite4java looks for first.
	return append(args, "-Djava.library.path="+lib, "-cp", filepath.Join(lib, "*"), dynamoLocalMain,
		"-inMemory", "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(port))
}

// errPortTaken: the port picked for DynamoDB Local was taken before it
// bound it.
var errPortTaken = errors.New("port taken")

func startDynamoLocalOnce(ctx context.Context, java, lib, logDir string, peak bool) (*process, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	logFile, err := os.CreateTemp(logDir, fmt.Sprintf("dynamodb-local-%d-*.log", port))
	if err != nil {
		return nil, "", fmt.Errorf("start dynamodb local: create log file: %w", err)
	}
	logPath := logFile.Name()
	args := dynamoLocalArgs(lib, port, peak)
	fmt.Fprintf(logFile, "# %s %s (started %s by pid %d)\n", java, strings.Join(args, " "), time.Now().Format(time.RFC3339), os.Getpid())
	cmd := exec.Command(java, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	p := &process{name: "DynamoDB Local", cmd: cmd, logPath: logPath, done: make(chan struct{})}
	err = p.start()
	logFile.Close() // the child holds its own copy
	if err != nil {
		return nil, "", fmt.Errorf("start dynamodb local: %s: %w (log: %s); %s", java, err, logPath, dynamoLocalHint)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := p.waitHealthy(ctx, listTables(url), dynamoLocalStartTimeout); err != nil {
		_ = p.stop(stopGracePeriod)
		if bindFailed(logPath) {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return nil, "", fmt.Errorf("start dynamodb local: not healthy on port %d: %w; %s; log: %s%s",
			port, err, dynamoLocalHint, logPath, logTail(logPath))
	}
	return p, url, nil
}

// listTables is DynamoDB Local's health check: the server is up once a
// ListTables call succeeds.
func listTables(url string) func(context.Context) error {
	db := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(url), Region: DefaultRegion, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:  httpClient,
	})
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := db.ListTables(ctx, &dynamodb.ListTablesInput{})
		return err
	}
}

// freePort returns a port that was free on every interface a moment ago
// (DynamoDB Local binds them all).
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("start dynamodb local: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// bindFailed reports whether the log shows the JVM could not bind its port.
func bindFailed(logPath string) bool {
	b, err := os.ReadFile(logPath)
	return err == nil && strings.Contains(string(b), "java.net.BindException")
}

// findDynamoLocal returns BATCHWORK_DYNAMODB_LOCAL, or .dynamodb-local/lib
// next to the nearest go.mod walking up from the working directory: a
// directory holding DynamoDBLocal-*.jar, its dependencies and the native
// sqlite4java library (what `make dynamodb-local` installs).
func findDynamoLocal() (string, error) {
	has := func(dir string) bool {
		m, _ := filepath.Glob(filepath.Join(dir, "DynamoDBLocal-*.jar"))
		return len(m) > 0
	}
	if dir := os.Getenv(EnvDynamoDBLocalDir); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("start dynamodb local: %s=%s holds no DynamoDBLocal-*.jar; %s", EnvDynamoDBLocalDir, dir, dynamoLocalHint)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("start dynamodb local: %w", err)
	}
	var tried []string
	for dir := wd; ; {
		if fileExists(filepath.Join(dir, "go.mod")) {
			cand := filepath.Join(dir, ".dynamodb-local", "lib")
			if has(cand) {
				return cand, nil
			}
			tried = append(tried, cand)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("start dynamodb local: not installed (looked in %s, above %s); %s, or set %s",
		strings.Join(tried, ", "), wd, dynamoLocalHint, EnvDynamoDBLocalDir)
}

// findJava returns $JAVA_HOME/bin/java, or java on the PATH.
func findJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java := filepath.Join(home, "bin", "java")
		if err := checkExecutable(java); err != nil {
			return "", fmt.Errorf("start dynamodb local: JAVA_HOME=%s: %w; it needs Java 17", home, err)
		}
		return java, nil
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("start dynamodb local: %w; install Java 17 (or set JAVA_HOME), or set %s=moto", err, EnvDynamoDB)
	}
	return java, nil
}
