package check

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// The bucket layout, re-declared from shared/blob/keys.go.
func outputKey(job, stage string, partition, attempt, part int) string {
	return fmt.Sprintf("jobs/%s/out/%s/%s/p%06d/a%d/part-%05d", job, stage, spread(partition), partition, attempt, part)
}

// spread is the two hex digits that spread a stage's outputs over 256
// prefixes: FNV-1a of the partition as 8 big-endian bytes, mod 256.
func spread(partition int) string {
	h := fnv.New32a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(partition))
	h.Write(b[:])
	return fmt.Sprintf("%02x", h.Sum32()%256)
}

// jobPrefix is the area of everything of a job in the bucket.
func jobPrefix(job string) string { return fmt.Sprintf("jobs/%s/", job) }

func outputsPrefix(job string) string { return fmt.Sprintf("jobs/%s/out/", job) }

func stageManifestKey(job, stage string) string {
	return fmt.Sprintf("jobs/%s/manifests/%s.json", job, stage)
}

func jobManifestKey(job string) string { return fmt.Sprintf("jobs/%s/manifest.json", job) }

// parseOutputKey reads an attempt output's key back.
func parseOutputKey(job, key string) (stage string, partition, attempt, part int, err error) {
	rest := key[len(outputsPrefix(job)):]
	i := bytes.IndexByte([]byte(rest), '/')
	if i < 0 {
		return "", 0, 0, 0, fmt.Errorf("output key %q: no stage", key)
	}
	stage = rest[:i]
	var sp string
	if j := bytes.IndexByte([]byte(rest[i+1:]), '/'); j >= 0 {
		sp = rest[i+1 : i+1+j+1]
	}
	if _, err := fmt.Sscanf(rest[i+1+len(sp):], "p%06d/a%d/part-%05d", &partition, &attempt, &part); err != nil {
		return "", 0, 0, 0, fmt.Errorf("output key %q: %w", key, err)
	}
	if outputKey(job, stage, partition, attempt, part) != key {
		return "", 0, 0, 0, fmt.Errorf("output key %q is not in the layout", key)
	}
	return stage, partition, attempt, part, nil
}

// manifest is a stage's or job's manifest as written to S3, with the
// outputs of its pages, if it has any.
type manifest struct {
	Job     string           `json:"job"`
	Outputs []manifestOutput `json:"outputs"`
}

type manifestOutput struct {
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt"`
	Part      int    `json:"part"`
	Key       string `json:"key"`
}

// storedManifest is a manifest object: its "outputs" is a list, or a
// string when the outputs are in pages or, for a shuffle stage's, in
// "shuffleOutputs" (re-declared from shared/blob/manifest.go).
type storedManifest struct {
	Job            string           `json:"job"`
	Outputs        json.RawMessage  `json:"outputs"`
	ShuffleOutputs []manifestOutput `json:"shuffleOutputs"`
	Pages          []string         `json:"pages"`
}

// slot names one output of a stage independently of the attempt that
// wrote it, so two runs' outputs can be paired.
type slot struct {
	Stage           string
	Partition, Part int
}

// store reads one bucket through its objects: S3 in a run, a map in the
// checker's own tests, so that a test can hand it a violation.
type store struct {
	objects objects
	bucket  string
}

// objects is what the checker reads of a bucket.
type objects interface {
	// get returns an object's bytes, or an error wrapping errNoObject.
	get(ctx context.Context, key string) ([]byte, error)
	// list returns every key under prefix.
	list(ctx context.Context, prefix string) ([]string, error)
}

// s3Objects reads a bucket on S3.
type s3Objects struct {
	s3     *s3.Client
	bucket string
}

var errNoObject = errors.New("no such object")

func (s store) get(ctx context.Context, key string) ([]byte, error) { return s.objects.get(ctx, key) }

func (s store) list(ctx context.Context, prefix string) ([]string, error) {
	return s.objects.list(ctx, prefix)
}

func (s s3Objects) get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	var nk *s3types.NoSuchKey
	if errors.As(err, &nk) {
		return nil, fmt.Errorf("s3://%s/%s: %w", s.bucket, key, errNoObject)
	}
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", s.bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", s.bucket, key, err)
	}
	return b, nil
}

func (s store) exists(ctx context.Context, key string) (bool, error) {
	_, err := s.get(ctx, key)
	if errors.Is(err, errNoObject) {
		return false, nil
	}
	return err == nil, err
}

func (s store) manifest(ctx context.Context, key string) (manifest, error) {
	var m manifest
	raw, err := s.get(ctx, key)
	if err != nil {
		return m, err
	}
	var st storedManifest
	if err := json.Unmarshal(raw, &st); err != nil {
		return m, fmt.Errorf("decode s3://%s/%s: %w", s.bucket, key, err)
	}
	m.Job = st.Job
	var note string
	switch {
	case json.Unmarshal(st.Outputs, &note) == nil:
		m.Outputs = st.ShuffleOutputs
	case json.Unmarshal(st.Outputs, &m.Outputs) != nil:
		return m, fmt.Errorf("decode s3://%s/%s: outputs %.40s", s.bucket, key, st.Outputs)
	}
	for _, page := range st.Pages {
		raw, err := s.get(ctx, page)
		if err != nil {
			return m, err
		}
		var p manifest
		if err := json.Unmarshal(raw, &p); err != nil {
			return m, fmt.Errorf("decode s3://%s/%s: %w", s.bucket, page, err)
		}
		m.Outputs = append(m.Outputs, p.Outputs...)
	}
	return m, nil
}

func (s s3Objects) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.s3, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", s.bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// fetchAll reads keys with a few requests in flight.
func (s store) fetchAll(ctx context.Context, keys []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(keys))
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b, err := s.get(ctx, k)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			out[k] = b
		}()
	}
	wg.Wait()
	return out, first
}

// sortedLines is b's lines in order, for outputs whose line order is not
// part of their meaning (a map task's shuffle partition).
func sortedLines(b []byte) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	slices.SortFunc(lines, bytes.Compare)
	return bytes.Join(lines, nil)
}

// shuffleParts is the partitions of an indexed shuffle object, the layout
// re-declared from shared/blob/shuffle.go ("BWSHUF1\n", the count P as a
// big-endian uint32, 4 reserved bytes, P+1 big-endian uint64 offsets,
// then the partitions), or b alone for any other object (one partition of
// the per-part layout). An index that does not fit b is left whole, to
// differ from the fault-free run's.
func shuffleParts(b []byte) [][]byte {
	const magic = "BWSHUF1\n"
	if len(b) < 16 || string(b[:8]) != magic {
		return [][]byte{b}
	}
	n := int64(binary.BigEndian.Uint32(b[8:]))
	if 16+8*(n+1) > int64(len(b)) {
		return [][]byte{b}
	}
	out := make([][]byte, 0, n)
	for r := range n {
		s, e := binary.BigEndian.Uint64(b[16+8*r:]), binary.BigEndian.Uint64(b[24+8*r:])
		if s > e || e > uint64(len(b)) {
			return [][]byte{b}
		}
		out = append(out, b[s:e])
	}
	return out
}

func newStore(cli *s3.Client, bucket string) store {
	return store{objects: s3Objects{s3: cli, bucket: bucket}, bucket: bucket}
}
