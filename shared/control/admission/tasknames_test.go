package admission

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/control/kernel"
)

// A long catalog is listed up to maxListedNames names.
func TestUnknownTaskListIsBounded(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range maxListedNames + 3 {
		names = append(names, fmt.Sprintf("t%03d", i))
	}
	msg := (&Admitter{catalog: func() kernel.TaskCatalog { return nil }}).taskList().unknownMessage("x", names)
	if !strings.HasSuffix(msg, fmt.Sprintf("t%03d and 3 more", maxListedNames-1)) || strings.Contains(msg, fmt.Sprintf("t%03d", maxListedNames)) {
		t.Fatalf("message %q: want the first %d names and \"and 3 more\"", msg, maxListedNames)
	}
}
