package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
	"github.com/batchwork/batchwork/shared/spec"
)

// whoamiCommand is `batchwork whoami`: the caller's owner and inputs area.
var whoamiCommand = &command{name: "whoami", args: "", summary: "show who you are to the API and where your inputs go",
	help: `Shows your owner (the IAM principal the API authenticated; an assumed role's
session counts as its role), your inputs area in the installation's data bucket,
and the other buckets the operator lets specs read. A spec's input prefix may
name your inputs area (inputs:<path> is a path in it), a folder one of your jobs
published to (its "output", in your outputs area), or one of those buckets;
anything else is refused. A job's own area (jobs/<id>/) is not an input.`,
	examples: []string{"batchwork whoami", "batchwork whoami -o json | jq -r .inputs"},
	run:      runWhoAmI}

// uploadCommand is `batchwork upload LOCAL [NAME]`.
var uploadCommand = &command{name: "upload", args: "LOCAL [NAME]", summary: "upload a file or directory into your inputs area, for a spec's inputs:NAME",
	help: `Uploads LOCAL (a file, or a directory with everything under it) into your
inputs area as NAME (default: LOCAL's base name), with your own AWS credentials
(on the local runner, into its emulator). A directory's files keep their paths
under NAME/. Name the upload in a spec's input prefix as inputs:NAME (a
directory: inputs:NAME/). Existing objects of the same names are replaced; do
not replace the inputs of a job that is running.`,
	examples: []string{
		"batchwork upload ./corpus              # then: input: {prefix: inputs:corpus/}",
		"batchwork upload ./logs/2026-11-21 logs/2026-11-21",
		"batchwork upload big.txt texts/big.txt -o json",
	},
	minArgs: 1, maxArgs: 2, run: runUpload}

func (a *app) whoami(ctx context.Context) (client.Identity, error) {
	c, err := a.client(ctx)
	if err != nil {
		return client.Identity{}, err
	}
	return c.WhoAmI(ctx)
}

func runWhoAmI(ctx context.Context, a *app, _ []string) int {
	id, err := a.whoami(ctx)
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, id)
		return ExitOK
	}
	tw := table(a.env.Stdout)
	fmt.Fprintf(tw, "owner:\t%s\n", termsafe.Text(id.Owner))
	fmt.Fprintf(tw, "inputs:\t%s\t(in a spec: %s<path>; upload with 'batchwork upload')\n", termsafe.Text(id.Inputs), spec.InputsScheme)
	buckets := "none"
	if len(id.InputBuckets) > 0 {
		buckets = strings.Join(id.InputBuckets, ", ")
	}
	fmt.Fprintf(tw, "input buckets:\t%s\n", termsafe.Text(buckets))
	_ = tw.Flush()
	return ExitOK
}

// uploadResult is what upload prints with -o json.
type uploadResult struct {
	// URI is where the files went; Prefix names it in a spec.
	URI    string `json:"uri"`
	Prefix string `json:"prefix"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
}

func runUpload(ctx context.Context, a *app, args []string) int {
	local := args[0]
	st, err := os.Stat(local)
	if err != nil {
		return a.fail(err)
	}
	name := filepath.ToSlash(filepath.Base(filepath.Clean(local)))
	if len(args) == 2 {
		name = args[1]
	}
	if st.IsDir() && !strings.HasSuffix(name, "/") {
		name += "/"
	}
	if err := checkUploadName(name); err != nil {
		return a.fail(&usageError{"NAME " + err.Error()})
	}
	// The files and their keys under NAME, before anything is sent.
	type file struct{ path, rel string }
	var files []file
	if st.IsDir() {
		err = filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(local, p)
			files = append(files, file{p, name + filepath.ToSlash(rel)})
			return err
		})
		if err != nil {
			return a.fail(err)
		}
	} else {
		rel := name
		if strings.HasSuffix(name, "/") {
			rel += filepath.Base(local)
		}
		files = append(files, file{local, rel})
	}
	id, err := a.whoami(ctx)
	if err != nil {
		return a.fail(err)
	}
	bucket, area, err := spec.ParseS3URI(id.Inputs)
	if err != nil || !strings.HasSuffix(area, "/") {
		return a.fail(fmt.Errorf("the API named %q as your inputs area, which is not an s3:// prefix", id.Inputs))
	}
	cli, err := a.s3Client(ctx, id)
	if err != nil {
		return a.fail(err)
	}
	res := uploadResult{URI: id.Inputs + name, Prefix: spec.InputsScheme + name}
	for _, f := range files {
		n, err := putFile(ctx, cli, bucket, area+f.rel, f.path)
		if err != nil {
			return a.fail(uploadError(err, bucket, area))
		}
		res.Files++
		res.Bytes += n
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, res)
		return ExitOK
	}
	fmt.Fprintf(a.env.Stdout, "Uploaded %d files (%s bytes) to %s\nName it in a spec as: %s\n", res.Files, count(res.Bytes), termsafe.Text(res.URI), termsafe.Text(res.Prefix))
	return ExitOK
}

// checkUploadName checks NAME: a path relative to the inputs area that a
// spec's inputs:<path> can name.
func checkUploadName(name string) error {
	switch {
	case name == "" || name == "/":
		return errors.New("is empty: give the path in your inputs area")
	case !utf8.ValidString(name):
		return errors.New("must be valid UTF-8")
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("%q is relative to your inputs area: drop the leading '/'", name)
	case len(name) > spec.MaxInputsPath:
		return fmt.Errorf("is %d bytes; at most %d fit in an S3 key under your inputs area", len(name), spec.MaxInputsPath)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%q has an empty, '.' or '..' segment", name)
		}
	}
	return nil
}

func putFile(ctx context.Context, cli *s3.Client, bucket, key, p string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f, ContentLength: aws.Int64(st.Size())}); err != nil {
		return 0, fmt.Errorf("upload %s to s3://%s/%s: %w", p, bucket, key, err)
	}
	return st.Size(), nil
}

// uploadError adds what to do to an upload the caller's credentials may
// not make.
func uploadError(err error, bucket, area string) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "AccessDenied" || ae.ErrorCode() == "Forbidden") {
		return fmt.Errorf("%w\nyour AWS credentials may not write your inputs area: they need s3:PutObject on arn:aws:s3:::%s/%s* (ask the operator)", err, bucket, area)
	}
	return err
}

// s3Client is an S3 client with the user's own AWS credentials (--profile,
// the usual chain). Against the local runner on an emulator it goes to the
// emulator's endpoint, which GET /whoami names, with dummy credentials,
// and only if that endpoint is on this machine; an endpoint named by an
// API that is not on this machine is ignored. So no API can direct the
// user's signed requests, or files, elsewhere.
func (a *app) s3Client(ctx context.Context, id client.Identity) (*s3.Client, error) {
	var opts []func(*config.LoadOptions) error
	if a.g.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(a.g.profile))
	}
	if a.g.region != "" {
		opts = append(opts, config.WithRegion(a.g.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &client.AuthError{Err: fmt.Errorf("load AWS configuration: %w", err)}
	}
	local := id.Endpoint != "" && client.IsLoopback(a.api.Endpoint)
	if local {
		// "On this machine" is no boundary (a port forward, another
		// user's listener): the endpoint must be on this machine too, and
		// it gets an emulator's dummy credentials, never the user's.
		ep, err := url.Parse(id.Endpoint)
		if err != nil || !client.IsLoopback(ep) {
			return nil, &usageError{fmt.Sprintf("the local API names S3 endpoint %q, which is not on this machine: refusing to upload there", id.Endpoint)}
		}
		if cfg.Region == "" {
			cfg.Region = "us-east-1"
		}
		cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
		cfg.BaseEndpoint = aws.String(id.Endpoint)
	} else if r := client.RegionOfHost(a.api.Endpoint.Hostname()); r != "" && a.g.region == "" {
		// The data bucket is in the API's region.
		cfg.Region = r
	}
	if cfg.Region == "" {
		return nil, &usageError{"no AWS region for the data bucket: set --region or AWS_REGION"}
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = local }), nil
}
