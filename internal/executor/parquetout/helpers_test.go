package parquetout

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func itoa(i int) string { return strconv.Itoa(i) }

func pqOpen(body []byte) (*parquet.File, error) {
	return parquet.OpenFile(bytes.NewReader(body), int64(len(body)))
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
