// Command executor is a user's executor in the construct's build tests: it
// registers two tasks with the public API and runs batchwork.Main, which
// lists them when the construct asks (BATCHWORK_LIST_TASKS=1).
package main

import (
	"context"

	"github.com/batchwork/batchwork/shared/batchwork"
)

func noop(context.Context, *batchwork.Task) error { return nil }

func main() {
	batchwork.Register("testdata.upper", noop)
	batchwork.Register("testdata.lower", noop)
	batchwork.Main()
}
