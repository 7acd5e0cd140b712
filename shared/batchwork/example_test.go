package batchwork_test

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// An executor registers its task functions and calls Main, which runs
// them as the Lambda or the long-polling host, as the environment says.
func Example() {
	batchwork.Register("upper", func(ctx context.Context, t *batchwork.Task) error {
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			if _, err := fmt.Fprintln(t.Out, strings.ToUpper(sc.Text())); err != nil {
				return err
			}
		}
		return sc.Err()
	})
	batchwork.Main()
}

// Task names are what a spec's stages refer to ("task": "wordcount.map").
func ExampleRegistry() {
	reg := batchwork.NewRegistry()
	reg.Register("wordcount.reduce", func(context.Context, *batchwork.Task) error { return nil })
	reg.Register("wordcount.map", func(context.Context, *batchwork.Task) error { return nil })
	fmt.Println(reg.Names())
	// Output: [wordcount.map wordcount.reduce]
}

// A map task of a stage with "shuffle": {"partitions": 2} emits key/value
// records; each key's records go to one partition, so one downstream task
// sees all of them.
func ExampleOutput_Emit() {
	countWords := func(ctx context.Context, t *batchwork.Task) error {
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			for _, w := range strings.Fields(sc.Text()) {
				if err := t.Out.Emit(w, "1"); err != nil {
					return err
				}
			}
		}
		return sc.Err()
	}
	res, err := batchwork.RunTask(context.Background(), countWords, batchwork.TaskInput{
		Input: strings.NewReader("that is\nthe question\n"),
		Parts: 2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for r, p := range res.Parts {
		fmt.Printf("partition %d:\n%s", r, p)
	}
	// Output:
	// partition 0:
	// that	1
	// the	1
	// partition 1:
	// is	1
	// question	1
}

// The task after a shuffle reads its partition's records with Records.
func ExampleRecords() {
	shuffled := strings.NewReader("be\t1\nto\t2\nbe\t3\n")
	sums := map[string]int{}
	err := batchwork.Records(shuffled, func(key, value string) error {
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("count of %q: %w", key, err)
		}
		sums[key] += n
		return nil
	})
	fmt.Println(sums, err)
	// Output: map[be:4 to:2] <nil>
}

// PartitionOf is the partition Emit sends a key to, for a task that
// writes its partitions itself with Part.
func ExamplePartitionOf() {
	for _, k := range []string{"that", "is", "the", "question"} {
		fmt.Println(k, batchwork.PartitionOf(k, 2))
	}
	// Output:
	// that 0
	// is 1
	// the 0
	// question 1
}

// RunTask unit tests a task function without AWS: here one that reads
// its partition's parameters.
func ExampleRunTask() {
	greet := func(ctx context.Context, t *batchwork.Task) error {
		t.Log.Info("greeting", "who", t.Params["who"])
		_, err := fmt.Fprintf(t.Out, "hello %s from %s/%d, attempt %d\n", t.Params["who"], t.Stage, t.Partition, t.Attempt)
		return err
	}
	res, err := batchwork.RunTask(context.Background(), greet, batchwork.TaskInput{
		Stage: "greet", Partition: 3, Params: map[string]string{"who": "ada"},
	})
	fmt.Printf("%s%v\n", res.Parts[0], err)
	// Output:
	// hello ada from greet/3, attempt 1
	// <nil>
}
