package emulator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/internal/testtier"
)

// clearEnv makes Start pick a local moto server, serving DynamoDB too,
// regardless of the caller's environment: most tests here are about moto
// and its launcher. The endpoint variables are unset, not emptied, since
// the SDK treats an empty AWS_ENDPOINT_URL as set.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{EnvEndpointURL, EnvEndpointURLDynamoDB, EnvEmulator, EnvMotoServer, EnvRegion, EnvDynamoDBLocalDir} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	t.Setenv(EnvDynamoDB, DynamoDBMoto)
}

// skipUnderShort skips a test that starts (or tries to start) the
// emulator's processes, which the unit tier does not.
func skipUnderShort(t *testing.T) {
	t.Helper()
	testtier.SkipUnderShort(t, "moto or DynamoDB Local processes")
}

func startTestMoto(t *testing.T) *Emulator {
	t.Helper()
	clearEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return e
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestMotoServices(t *testing.T) {
	skipUnderShort(t)
	e := startTestMoto(t)
	ctx := context.Background()

	if e.Kind != KindMoto || e.Region != DefaultRegion || !strings.HasPrefix(e.URL, "http://127.0.0.1:") {
		t.Fatalf("unexpected emulator %+v", e)
	}
	if _, err := os.Stat(e.LogPath); err != nil {
		t.Fatalf("log file: %v", err)
	}
	cfg := e.AWSConfig()

	// DynamoDB.
	ddb := dynamodb.NewFromConfig(cfg)
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("jobs"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	_, err = ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("jobs"),
		Item: map[string]ddbtypes.AttributeValue{
			"pk":    &ddbtypes.AttributeValueMemberS{Value: "job#1"},
			"state": &ddbtypes.AttributeValueMemberS{Value: "pending"},
		},
	})
	if err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	got, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String("jobs"),
		Key:            map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "job#1"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if s, ok := got.Item["state"].(*ddbtypes.AttributeValueMemberS); !ok || s.Value != "pending" {
		t.Fatalf("GetItem state = %#v", got.Item["state"])
	}

	// SQS.
	sq := sqs.NewFromConfig(cfg)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hello")}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	rcv, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if len(rcv.Messages) != 1 || aws.ToString(rcv.Messages[0].Body) != "hello" {
		t.Fatalf("ReceiveMessage = %+v", rcv.Messages)
	}
	if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: rcv.Messages[0].ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}

	// S3, path style.
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("artifacts")}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("artifacts"), Key: aws.String("a/b.txt"), Body: strings.NewReader("payload")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("artifacts"), Key: aws.String("a/b.txt")})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	body, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(body) != "payload" {
		t.Fatalf("GetObject body = %q", body)
	}

	// Reset wipes everything.
	if err := e.Reset(ctx); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	tables, err := ddb.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	if len(tables.TableNames) != 0 {
		t.Fatalf("tables after Reset: %v", tables.TableNames)
	}
	buckets, err := s3c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatalf("ListBuckets: %v", err)
	}
	if len(buckets.Buckets) != 0 {
		t.Fatalf("buckets after Reset: %d", len(buckets.Buckets))
	}

	// Stop: the port is closed afterwards, and Stop is idempotent.
	addr := hostPort(t, e.URL)
	if !accepts(addr) {
		t.Fatalf("%s not accepting before Stop", addr)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if accepts(addr) {
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestBadMotoServerPath(t *testing.T) {
	skipUnderShort(t)
	clearEnv(t)
	bad := filepath.Join(t.TempDir(), "no", "moto_server")
	t.Setenv(EnvMotoServer, bad)
	e, err := Start(context.Background())
	if err == nil {
		e.Stop()
		t.Fatal("Start succeeded with a missing moto_server")
	}
	if !strings.Contains(err.Error(), "make venv") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("error should mention `make venv` and the path: %v", err)
	}
}

func TestMotoServerExitsEarly(t *testing.T) {
	skipUnderShort(t)
	if runtime.GOOS == "windows" {
		t.Skip("uses a shell script")
	}
	clearEnv(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "moto_server")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho boom-from-fake-moto >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvMotoServer, script)
	t.Setenv(EnvLogDir, filepath.Join(dir, "logs"))
	e, err := Start(context.Background())
	if err == nil {
		e.Stop()
		t.Fatal("Start succeeded with a failing moto_server")
	}
	msg := err.Error()
	for _, want := range []string{"make venv", filepath.Join(dir, "logs"), "boom-from-fake-moto", "exit status 3"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

func TestPinnedPortInUse(t *testing.T) {
	skipUnderShort(t)
	clearEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	e, err := StartWith(context.Background(), Options{Port: port})
	if err == nil {
		e.Stop()
		t.Fatalf("StartWith on busy port %d succeeded", port)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("want EADDRINUSE, got %v", err)
	}
}

func TestPinnedPort(t *testing.T) {
	skipUnderShort(t)
	clearEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	e, err := StartWith(context.Background(), Options{Port: port, LogDir: t.TempDir()})
	if err != nil {
		t.Fatalf("StartWith: %v", err)
	}
	defer e.Stop()
	if want := "http://127.0.0.1:" + strconv.Itoa(port); e.URL != want {
		t.Fatalf("URL = %s, want %s", e.URL, want)
	}
}

func TestExternalEndpoint(t *testing.T) {
	skipUnderShort(t)
	base := startTestMoto(t)
	t.Setenv(EnvEndpointURL, base.URL)
	t.Setenv(EnvRegion, "eu-west-1")

	e, err := Start(context.Background())
	if err != nil {
		t.Fatalf("Start external: %v", err)
	}
	if e.Kind != KindExternal || e.URL != base.URL || e.Region != "eu-west-1" || e.LogPath != "" {
		t.Fatalf("unexpected external emulator %+v", e)
	}
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(e.AWSConfig())
	_, err = ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("ext"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable via external: %v", err)
	}
	// The external endpoint is a moto server, so Reset works on it.
	if err := e.Reset(ctx); err != nil {
		t.Fatalf("Reset via external moto: %v", err)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("external Stop: %v", err)
	}
	// Stop on an external emulator must not stop the server.
	if _, err := ddb.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("server gone after external Stop: %v", err)
	}
}

func TestExternalNonMoto(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	clearEnv(t)
	t.Setenv(EnvEndpointURL, srv.URL)
	e, err := Start(context.Background())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer e.Stop()
	if e.Kind != KindExternal || e.Region != DefaultRegion {
		t.Fatalf("unexpected %+v", e)
	}
	if err := e.Reset(context.Background()); !errors.Is(err, ErrResetNotSupported) {
		t.Fatalf("Reset = %v, want ErrResetNotSupported", err)
	}
	cfg := e.AWSConfig()
	if aws.ToString(cfg.BaseEndpoint) != srv.URL || cfg.Region != DefaultRegion {
		t.Fatalf("AWSConfig = %+v", cfg)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "test" || creds.SecretAccessKey != "test" {
		t.Fatalf("credentials = %+v, %v", creds, err)
	}
}

func TestExternalUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	clearEnv(t)
	t.Setenv(EnvEndpointURL, "http://"+addr)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	e, err := Start(ctx)
	if err == nil {
		e.Stop()
		t.Fatal("Start succeeded against a closed port")
	}
	if !strings.Contains(err.Error(), EnvEndpointURL) {
		t.Fatalf("error should name %s: %v", EnvEndpointURL, err)
	}
}

func TestUnknownEmulator(t *testing.T) {
	clearEnv(t)
	t.Setenv(EnvEmulator, "dynalite")
	if _, err := Start(context.Background()); err == nil || !strings.Contains(err.Error(), "dynalite") {
		t.Fatalf("Start = %v, want unknown-emulator error", err)
	}
}

const leakHelperEnv = "BATCHWORK_EMULATOR_TEST_LEAK_HELPER"

// TestLeakHelper is not a test: TestNoLeakWhenTestProcessDies runs the test
// binary with it to start moto and DynamoDB Local and then die without
// calling Stop.
func TestLeakHelper(t *testing.T) {
	if os.Getenv(leakHelperEnv) != "1" {
		t.Skip("helper process for TestNoLeakWhenTestProcessDies")
	}
	e, err := Start(context.Background())
	if err != nil {
		os.Stdout.WriteString("ERR " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("URLS " + e.URL + " " + e.DynamoURL + "\n")
	// Die hard, as a crashed or killed `go test` would: no Stop, no cleanup.
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func TestNoLeakWhenTestProcessDies(t *testing.T) {
	skipUnderShort(t)
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal is Linux only")
	}
	clearEnv(t)
	t.Setenv(EnvDynamoDB, DynamoDBLocal)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), leakHelperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var urls []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if u, ok := strings.CutPrefix(line, "URLS "); ok {
			urls = strings.Fields(u)
			break
		}
		if strings.HasPrefix(line, "ERR ") {
			t.Fatalf("helper: %s", line)
		}
	}
	go io.Copy(io.Discard, out)
	_ = cmd.Wait()
	if len(urls) != 2 || urls[0] == urls[1] {
		t.Fatalf("helper reported %v, want moto's and DynamoDB Local's URLs", urls)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, u := range urls {
		addr := hostPort(t, u)
		for accepts(addr) {
			if time.Now().After(deadline) {
				t.Fatalf("server at %s outlived its dead parent", addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// The bench's leak workaround must not change what moto does: a
// transaction still applies all of its items, or none of them when one
// condition fails (moto rolls back from its table copy).
func TestUntrackTablesKeepsTransactions(t *testing.T) {
	skipUnderShort(t)
	clearEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := StartWith(ctx, Options{UntrackTables: true})
	if err != nil {
		t.Fatalf("StartWith: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	ddb := dynamodb.NewFromConfig(e.AWSConfig())
	_, err = ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("t"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	add := func(pk, cond string) ddbtypes.TransactWriteItem {
		u := &ddbtypes.Update{
			TableName: aws.String("t"), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
			UpdateExpression:          aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
		}
		if cond != "" {
			u.ConditionExpression = aws.String(cond)
		}
		return ddbtypes.TransactWriteItem{Update: u}
	}
	for i, tc := range []struct {
		items  []ddbtypes.TransactWriteItem
		wantOK bool
	}{
		{[]ddbtypes.TransactWriteItem{add("a", ""), add("b", "")}, true},
		// b exists now, so this one fails and must leave a at 1.
		{[]ddbtypes.TransactWriteItem{add("a", ""), add("b", "attribute_not_exists(pk)")}, false},
	} {
		_, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tc.items})
		if (err == nil) != tc.wantOK {
			t.Fatalf("transaction %d: err %v, want ok=%v", i, err, tc.wantOK)
		}
	}
	for _, pk := range []string{"a", "b"} {
		got, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String("t"), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := got.Item["n"].(*ddbtypes.AttributeValueMemberN).Value; n != "1" {
			t.Fatalf("%s = %s after one applied and one cancelled transaction, want 1", pk, n)
		}
	}
}

// DynamoDB applies each request atomically. Plain moto serves requests on
// threads without a lock, and concurrent transactions on one counter can
// lose a decrement: measured with Python against plain moto 5.2.5, 4 of 40
// rounds of this exact pattern (Batchwork's commit: a conditional
// decrement, and the one caller that finds the counter at 1 decrements it
// unconditionally) left the counter at 1 with every caller done. The
// launcher's lock must make every round end at 0 with exactly one last.
func TestConcurrentCountdownIsExact(t *testing.T) {
	skipUnderShort(t)
	e := startTestMoto(t)
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(e.AWSConfig())
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("c"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v int) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(v)} }
	// Filler: moto snapshots the table per transaction item, and a longer
	// snapshot is a wider window for the race.
	for i := 0; i < 300; i++ {
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("c"),
			Item: map[string]ddbtypes.AttributeValue{"pk": s(fmt.Sprint("filler", i)), "v": s(strings.Repeat("y", 50))}}); err != nil {
			t.Fatal(err)
		}
	}
	const rounds, workers = 40, 4
	for r := 0; r < rounds; r++ {
		counter := fmt.Sprint("cnt", r)
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("c"),
			Item: map[string]ddbtypes.AttributeValue{"pk": s(counter), "left": n(workers)}}); err != nil {
			t.Fatal(err)
		}
		commit := func(w int, last bool) error {
			dec := &ddbtypes.Update{TableName: aws.String("c"), Key: map[string]ddbtypes.AttributeValue{"pk": s(counter)},
				UpdateExpression: aws.String("ADD #l :m"), ExpressionAttributeNames: map[string]string{"#l": "left"},
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":m": n(-1)}}
			if !last {
				dec.ConditionExpression = aws.String("#l > :one")
				dec.ExpressionAttributeValues[":one"] = n(1)
			}
			_, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Update: &ddbtypes.Update{TableName: aws.String("c"), Key: map[string]ddbtypes.AttributeValue{"pk": s(fmt.Sprint("task", r, "-", w))},
					UpdateExpression: aws.String("SET st = :d"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":d": s("done")}}},
				{Update: dec},
			}})
			return err
		}
		lasts := make(chan error, workers)
		for w := 0; w < workers; w++ {
			go func() {
				err := commit(w, false)
				var tce *ddbtypes.TransactionCanceledException
				if errors.As(err, &tce) {
					lasts <- commit(w, true)
					return
				}
				if err != nil {
					lasts <- err
					return
				}
				lasts <- errNotLast
			}()
		}
		nLast := 0
		for w := 0; w < workers; w++ {
			switch err := <-lasts; {
			case err == nil:
				nLast++
			case !errors.Is(err, errNotLast):
				t.Fatalf("round %d: %v", r, err)
			}
		}
		got, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("c"),
			Key: map[string]ddbtypes.AttributeValue{"pk": s(counter)}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if left := got.Item["left"].(*ddbtypes.AttributeValueMemberN).Value; left != "0" || nLast != 1 {
			t.Fatalf("round %d: counter at %s with %d callers seeing the last decrement, want 0 and 1", r, left, nLast)
		}
	}
}

var errNotLast = errors.New("not the last")

// The launcher rolls a cancelled transaction back by the items it names
// instead of moto's whole-table copy (see motoLauncher). Each case runs
// one transaction over a range-keyed and a hash-keyed table that already
// hold items; a cancelled one must leave every item exactly as it was
// (an item it put absent, an item it updated in place unchanged, an item
// it deleted back), and an applied one must apply all of its writes.
func TestTransactionsRollBack(t *testing.T) {
	skipUnderShort(t)
	e := startTestMoto(t)
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(e.AWSConfig())
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	for _, tb := range []struct {
		name   string
		range_ bool
	}{{"hr", true}, {"h", false}} {
		in := &dynamodb.CreateTableInput{
			TableName:            aws.String(tb.name),
			BillingMode:          ddbtypes.BillingModePayPerRequest,
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		}
		if tb.range_ {
			in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS})
			in.KeySchema = append(in.KeySchema, ddbtypes.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange})
		}
		if _, err := ddb.CreateTable(ctx, in); err != nil {
			t.Fatalf("CreateTable %s: %v", tb.name, err)
		}
	}
	key := func(table, id string) map[string]ddbtypes.AttributeValue {
		k := map[string]ddbtypes.AttributeValue{"pk": s(id)}
		if table == "hr" {
			k["sk"] = s("S")
		}
		return k
	}
	item := func(table, id, v string) map[string]ddbtypes.AttributeValue {
		it := key(table, id)
		it["v"] = s(v)
		return it
	}
	// state reads every item of both tables: table/id -> v ("" if absent).
	state := func() map[string]string {
		out := map[string]string{}
		for _, table := range []string{"hr", "h"} {
			for _, id := range []string{"old", "upd", "del", "new", "chk"} {
				got, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(table, id), ConsistentRead: aws.Bool(true)})
				if err != nil {
					t.Fatal(err)
				}
				if v, ok := got.Item["v"].(*ddbtypes.AttributeValueMemberS); ok {
					out[table+"/"+id] = v.Value
				}
			}
		}
		return out
	}
	reset := func() {
		for _, table := range []string{"hr", "h"} {
			for _, id := range []string{"new"} {
				if _, err := ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(table, id)}); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"old", "upd", "del", "chk"} {
				if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(table, id, "0")}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	writes := func(table string) []ddbtypes.TransactWriteItem {
		return []ddbtypes.TransactWriteItem{
			{Put: &ddbtypes.Put{TableName: aws.String(table), Item: item(table, "new", "1")}},
			{Update: &ddbtypes.Update{TableName: aws.String(table), Key: key(table, "upd"),
				UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": s("1")}}},
			{Delete: &ddbtypes.Delete{TableName: aws.String(table), Key: key(table, "del")}},
		}
	}
	check := func(table, cond string) ddbtypes.TransactWriteItem {
		return ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{TableName: aws.String(table), Key: key(table, "chk"),
			ConditionExpression: aws.String(cond), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": s("0")}}}
	}
	before := map[string]string{}
	applied := map[string]string{}
	for _, table := range []string{"hr", "h"} {
		for _, id := range []string{"old", "upd", "del", "chk"} {
			before[table+"/"+id] = "0"
			applied[table+"/"+id] = "0"
		}
		applied[table+"/new"], applied[table+"/upd"] = "1", "1"
		delete(applied, table+"/del")
	}
	for _, tc := range []struct {
		name  string
		items []ddbtypes.TransactWriteItem
		want  map[string]string
	}{
		{"applied", append(append(writes("hr"), writes("h")...), check("hr", "v = :v")), applied},
		{"check fails last", append(append(writes("hr"), writes("h")...), check("h", "v <> :v")), before},
		{"check fails first", append([]ddbtypes.TransactWriteItem{check("hr", "v <> :v")}, append(writes("hr"), writes("h")...)...), before},
		{"put condition fails", append(writes("h"), ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String("hr"),
			Item: item("hr", "old", "1"), ConditionExpression: aws.String("attribute_not_exists(pk)")}}), before},
		{"two writes to one item", append(writes("hr"), ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String("hr"),
			Item: item("hr", "upd", "2")}}), before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reset()
			_, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tc.items})
			if wantOK := tc.want["hr/new"] == "1"; (err == nil) != wantOK {
				t.Fatalf("err %v, want applied=%v", err, wantOK)
			}
			if got := state(); !maps.Equal(got, tc.want) {
				t.Errorf("items after the transaction:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// DynamoDB Local is the default DynamoDB beside moto: clients built from
// AWSConfig reach it (and moto for everything else), and it behaves like
// DynamoDB, honouring ClientRequestToken (which moto's DynamoDB does only
// through the launcher). A fidelity test: switching the default back to
// moto's DynamoDB fails it.
func TestDynamoDBLocalByDefault(t *testing.T) {
	skipUnderShort(t)
	clearEnv(t)
	t.Setenv(EnvDynamoDB, "")
	os.Unsetenv(EnvDynamoDB)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if e.Kind != KindMoto || e.Dynamo != KindDynamoDBLocal || e.DynamoURL == e.URL || !strings.HasPrefix(e.DynamoURL, "http://127.0.0.1:") {
		t.Fatalf("unexpected emulator %+v", e)
	}
	if _, err := os.Stat(e.DynamoLogPath); err != nil {
		t.Fatalf("DynamoDB Local log file: %v", err)
	}

	cfg := e.AWSConfig()
	ddb := dynamodb.NewFromConfig(cfg)
	if got := aws.ToString(ddb.Options().BaseEndpoint); got != e.DynamoURL {
		t.Fatalf("DynamoDB client endpoint %s, want %s", got, e.DynamoURL)
	}
	const table = "jobs"
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	// The table is on the DynamoDB URL, asked directly, and not in moto.
	tablesAt := func(url string) []string {
		c := aws.Config{Region: cfg.Region, Credentials: cfg.Credentials, BaseEndpoint: aws.String(url)}
		out, err := dynamodb.NewFromConfig(c).ListTables(ctx, &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatalf("ListTables on %s: %v", url, err)
		}
		return out.TableNames
	}
	if got := tablesAt(e.DynamoURL); len(got) != 1 || got[0] != table {
		t.Fatalf("tables on DynamoDB Local: %v, want [%s]", got, table)
	}
	if got := tablesAt(e.URL); len(got) != 0 {
		t.Fatalf("tables on moto: %v, want none", got)
	}
	// Everything else is moto's.
	if _, err := sqs.NewFromConfig(cfg).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")}); err != nil {
		t.Fatalf("CreateQueue on moto: %v", err)
	}

	put := func(token, pk string) error {
		_, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			ClientRequestToken: aws.String(token),
			TransactItems: []ddbtypes.TransactWriteItem{{Put: &ddbtypes.Put{TableName: aws.String(table),
				Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}}}},
		})
		return err
	}
	if err := put("token-1", "a"); err != nil {
		t.Fatalf("TransactWriteItems: %v", err)
	}
	if err := put("token-1", "a"); err != nil {
		t.Fatalf("TransactWriteItems retried with its token: %v", err)
	}
	var mismatch *ddbtypes.IdempotentParameterMismatchException
	if err := put("token-1", "b"); !errors.As(err, &mismatch) {
		t.Fatalf("same token, other parameters: %v, want IdempotentParameterMismatchException", err)
	}

	if err := e.Reset(ctx); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if got := tablesAt(e.DynamoURL); len(got) != 0 {
		t.Fatalf("tables on DynamoDB Local after Reset: %v", got)
	}

	addrs := []string{hostPort(t, e.URL), hostPort(t, e.DynamoURL)}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, addr := range addrs {
		if accepts(addr) {
			t.Errorf("%s still accepts connections after Stop", addr)
		}
	}
}

// A DynamoDB Local that cannot start fails Start with what to do; the
// run never goes on without it.
func TestDynamoDBLocalMissing(t *testing.T) {
	skipUnderShort(t)
	clearEnv(t)
	t.Setenv(EnvDynamoDB, DynamoDBLocal)
	t.Setenv(EnvDynamoDBLocalDir, t.TempDir())
	e, err := Start(context.Background())
	if err == nil {
		e.Stop()
		t.Fatal("Start succeeded without DynamoDB Local")
	}
	for _, want := range []string{"start dynamodb local", "make dynamodb-local", EnvDynamoDB + "=moto"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

// How DynamoDB is chosen, and where AWSConfig sends it.
func TestDynamoDBSelection(t *testing.T) {
	skipUnderShort(t)
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	dynamo := httptest.NewServer(http.NotFoundHandler())
	defer dynamo.Close()
	cases := []struct {
		name          string
		env           map[string]string
		wantKind      string
		wantDynamoURL string // "" means URL
	}{
		{"moto serves it", map[string]string{EnvDynamoDB: DynamoDBMoto}, KindMoto, ""},
		{"external endpoint serves it", map[string]string{EnvEndpointURL: other.URL}, KindExternal, ""},
		{"AWS_ENDPOINT_URL_DYNAMODB over AWS_ENDPOINT_URL", map[string]string{EnvEndpointURL: other.URL, EnvEndpointURLDynamoDB: dynamo.URL}, KindExternal, dynamo.URL},
		{"AWS_ENDPOINT_URL_DYNAMODB beside moto", map[string]string{EnvDynamoDB: DynamoDBMoto, EnvEndpointURLDynamoDB: dynamo.URL}, KindExternal, dynamo.URL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			e, err := Start(context.Background())
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer e.Stop()
			want := c.wantDynamoURL
			if want == "" {
				want = e.URL
			}
			if e.Dynamo != c.wantKind || e.DynamoURL != want {
				t.Fatalf("DynamoDB %s at %s, want %s at %s", e.Dynamo, e.DynamoURL, c.wantKind, want)
			}
			cfg := e.AWSConfig()
			if got := aws.ToString(dynamodb.NewFromConfig(cfg).Options().BaseEndpoint); got != want {
				t.Errorf("DynamoDB client endpoint %s, want %s", got, want)
			}
			if got := aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint); got != e.URL {
				t.Errorf("SQS client endpoint %s, want %s", got, e.URL)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		clearEnv(t)
		t.Setenv(EnvDynamoDB, "dynalite")
		if _, err := Start(context.Background()); err == nil || !strings.Contains(err.Error(), "dynalite") {
			t.Fatalf("Start = %v, want an error naming the value", err)
		}
	})
	t.Run("empty AWS_ENDPOINT_URL", func(t *testing.T) {
		clearEnv(t)
		t.Setenv(EnvDynamoDB, DynamoDBLocal)
		t.Setenv(EnvEndpointURL, "")
		if _, err := Start(context.Background()); err == nil || !strings.Contains(err.Error(), "set but empty") {
			t.Fatalf("Start = %v, want an error about the empty %s", err, EnvEndpointURL)
		}
	})
}

// The launcher replaces the linear searches in moto's SQS (moto.go); what
// SQS promises about counts, visibility, receipt handles, the dead-letter
// move and purge must come out the same.
func TestSQSKeepsItsAnswers(t *testing.T) {
	skipUnderShort(t)
	e := startTestMoto(t)
	ctx := context.Background()
	q := sqs.NewFromConfig(e.AWSConfig())
	create := func(name string, attrs map[string]string) string {
		t.Helper()
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatalf("CreateQueue %s: %v", name, err)
		}
		return *out.QueueUrl
	}
	dlq := create("dlq", nil)
	dlqARN, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	src := create("src", map[string]string{
		"VisibilityTimeout": "30",
		"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, dlqARN.Attributes["QueueArn"]),
	})
	counts := func(url string, visible, inFlight, delayed string) {
		t.Helper()
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		got := [3]string{out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"], out.Attributes["ApproximateNumberOfMessagesDelayed"]}
		if want := [3]string{visible, inFlight, delayed}; got != want {
			t.Errorf("%s visible, in flight, delayed: %v, want %v", url, got, want)
		}
	}
	receive := func(url string) []sqstypes.Message {
		t.Helper()
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		return out.Messages
	}
	invalid := func(what string, err error) {
		t.Helper()
		var rh *sqstypes.ReceiptHandleIsInvalid
		if !errors.As(err, &rh) {
			t.Errorf("%s: %v, want ReceiptHandleIsInvalid", what, err)
		}
	}

	if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &src, Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("a")},
		{Id: aws.String("b"), MessageBody: aws.String("b")},
		{Id: aws.String("c"), MessageBody: aws.String("c"), DelaySeconds: 600},
	}}); err != nil {
		t.Fatal(err)
	}
	counts(src, "2", "0", "1")
	got := receive(src)
	if len(got) != 2 {
		t.Fatalf("received %d messages, want the 2 not delayed", len(got))
	}
	counts(src, "0", "2", "1")
	if more := receive(src); len(more) != 0 {
		t.Errorf("received %d messages in flight or delayed", len(more))
	}
	a, b := got[0], got[1]
	for range 2 { // a second delete of a deleted message is no error
		if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &src, ReceiptHandle: a.ReceiptHandle}); err != nil {
			t.Fatalf("DeleteMessage: %v", err)
		}
	}
	counts(src, "0", "1", "1")
	_, err = q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &src, ReceiptHandle: aws.String("no-such-handle")})
	invalid("delete with an unknown handle", err)
	_, err = q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: aws.String("no-such-handle")})
	invalid("visibility change with an unknown handle", err)
	_, err = q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &dlq, ReceiptHandle: b.ReceiptHandle})
	invalid("delete through another queue", err)

	// Visible again at once, received a second time, and on the receive
	// after that moved to the dead-letter queue.
	if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: b.ReceiptHandle}); err != nil {
		t.Fatalf("ChangeMessageVisibility: %v", err)
	}
	counts(src, "1", "0", "1")
	again := receive(src)
	if len(again) != 1 || *again[0].Body != "b" {
		t.Fatalf("received %v after the visibility change, want b", again)
	}
	if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: again[0].ReceiptHandle}); err != nil {
		t.Fatalf("ChangeMessageVisibility: %v", err)
	}
	if more := receive(src); len(more) != 0 {
		t.Errorf("received %d messages past maxReceiveCount", len(more))
	}
	counts(src, "0", "0", "1")
	moved := receive(dlq)
	if len(moved) != 1 || *moved[0].Body != "b" {
		t.Fatalf("dead-letter queue holds %v, want b", moved)
	}
	if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &dlq, ReceiptHandle: moved[0].ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage from the dead-letter queue: %v", err)
	}
	counts(dlq, "0", "0", "0")

	if _, err := q.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &src}); err != nil {
		t.Fatal(err)
	}
	counts(src, "0", "0", "0")
}
