package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/cmd/chaos/chaostasks"
	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/join"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/principal"
)

// The workload's shape: small jobs, so a hundred fit in a couple of
// minutes on the emulator, each with several stages and a few tasks per
// stage, so kills land in every kind of step.
const (
	corpusFiles   = 2
	corpusBytes   = 16 << 10 // per file
	splitSize     = 8 << 10  // 4 map tasks
	reducers      = 3
	diamondWidth  = 2
	joinMaps      = 3
	joinCustomers = 2
	joinPartition = 3
)

// inputPrefix is where the word-count corpus sits: the run's owner's
// inputs area, the only place of the data bucket a spec may read inputs
// from.
var inputPrefix = blob.InputsPrefix(principal.Key(owner)) + inputPath

// inputPath is the corpus's path in the owner's inputs area, named in the
// word-count spec as inputShorthand; splitPath is the dynamic-split
// workload's input (chaostasks.DynSplitFiles larger objects).
const (
	inputPath      = "wordcount/"
	inputShorthand = "inputs:" + inputPath
	splitPath      = "dynsplit/"
	splitShorthand = "inputs:" + splitPath
)

// splitPrefix is where the dynamic-split workload's input sits.
var splitPrefix = blob.InputsPrefix(principal.Key(owner)) + splitPath

// workload is one job of the run: the same spec in both runs.
type workload struct {
	Kind string // wordcount, diamond, join, or a chaostasks kind
	Name string
	Spec []byte
}

// settings are what the run sets in every spec.
type settings struct {
	Lease time.Duration
	// MaxAttempts, when set, overrides the examples' retry budget.
	MaxAttempts int
}

// kinds are the workloads a run cycles through: the three examples, then
// the failure-tolerance mechanisms (chaostasks).
var kinds = append([]string{"wordcount", "diamond", "join"}, chaostasks.Kinds...)

// workloads builds n jobs, cycling through the kinds and the three
// priorities (every ready queue carries work), each with the run's
// settings.
func workloads(n int, bucket string, set settings) ([]workload, error) {
	priorities := []string{"normal", "high", "low"}
	out := make([]workload, 0, n)
	for i := range n {
		prio := priorities[(i/len(kinds))%3]
		var w workload
		var err error
		switch k := kinds[i%len(kinds)]; k {
		default:
			w.Kind, w.Name = k, fmt.Sprintf("%s-%03d", k, i)
			var spec []byte
			if spec, err = chaostasks.Spec(k, w.Name, inputShorthand, splitShorthand); err == nil {
				w.Spec = withYAML(spec, set, prio)
			}
		case "wordcount":
			w.Kind, w.Name = "wordcount", fmt.Sprintf("wordcount-%03d", i)
			// inputs:<path>: each run's deployment reads the corpus from
			// its own bucket's inputs area (the same spec in both runs).
			w.Spec, err = withJSON(wordcount.Spec(w.Name, inputShorthand, splitSize, reducers), set, prio)
		case "diamond":
			w.Kind, w.Name = "diamond", fmt.Sprintf("diamond-%03d", i)
			w.Spec = withYAML(diamond.Spec(w.Name, diamondWidth), set, prio)
		case "join":
			w.Kind, w.Name = "join", fmt.Sprintf("join-%03d", i)
			w.Spec = withYAML(join.Spec(w.Name, joinMaps, joinCustomers, joinPartition), set, prio)
		}
		if err != nil {
			return nil, fmt.Errorf("spec of %s: %w", w.Name, err)
		}
		out = append(out, w)
	}
	return out, nil
}

// withYAML adds the run's settings to a YAML spec as top-level keys.
func withYAML(spec []byte, set settings, priority string) []byte {
	out := fmt.Appendf(bytes.Clone(spec), "lease: %s\npriority: %s\n", set.Lease, priority)
	if set.MaxAttempts > 0 {
		out = fmt.Appendf(out, "retry: {maxAttempts: %d, backoff: 1s}\n", set.MaxAttempts)
	}
	return out
}

// withJSON adds the run's settings to a JSON spec.
func withJSON(spec []byte, set settings, priority string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, err
	}
	doc["lease"] = set.Lease.String()
	doc["priority"] = priority
	if set.MaxAttempts > 0 {
		doc["retry"] = map[string]any{"maxAttempts": set.MaxAttempts, "backoff": "1s"}
	}
	return json.Marshal(doc)
}

// wantError is the error a job of kind must fail with; "" for a job that
// must succeed.
func wantError(kind string) string {
	if kind == chaostasks.KindDeadline {
		return chaostasks.DeadlineError
	}
	return ""
}

// normalizer says how to compare a kind's outputs across runs: the
// diamond example writes its attempt number, which differs between runs
// by design; everything else must be byte-identical.
func normalizer(kind string) func([]byte) []byte {
	if kind != "diamond" {
		return nil
	}
	return func(b []byte) []byte { return attemptField.ReplaceAll(b, []byte("attempt N")) }
}

// splitInput is the prefix of the input a kind's dynamicSplit stage reads
// (the checker checks its tasks tile it); "" for the other kinds.
func splitInput(kind string) string {
	if kind == chaostasks.KindDynSplit {
		return splitPrefix
	}
	return ""
}

// verifier says how to check each output of a kind on its own.
func verifier(kind string) func([]byte) error {
	if kind == chaostasks.KindCheckpoint {
		return chaostasks.CheckNumbered
	}
	return nil
}

var attemptField = regexp.MustCompile(`attempt [0-9]+`)

// uploadCorpus writes the word-count input and the dynamic-split
// workload's, generated from fixed seeds.
func uploadCorpus(ctx context.Context, cli *s3.Client, bucket string) error {
	put := func(key string, body []byte) error {
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			return fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
		}
		return nil
	}
	for i := range corpusFiles {
		if err := put(fmt.Sprintf("%spart-%d.txt", inputPrefix, i), wordcount.Corpus(uint64(i+1), corpusBytes)); err != nil {
			return err
		}
	}
	for i := range chaostasks.DynSplitFiles {
		if err := put(fmt.Sprintf("%spart-%d.txt", splitPrefix, i), wordcount.Corpus(uint64(100+i), chaostasks.DynSplitBytes)); err != nil {
			return err
		}
	}
	return nil
}
