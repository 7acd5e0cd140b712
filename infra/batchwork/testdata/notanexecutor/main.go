// Command notanexecutor ignores BATCHWORK_LIST_TASKS: the construct must
// refuse it with a clear error instead of deploying unknown task names.
package main

import "fmt"

func main() { fmt.Println("hello") }
