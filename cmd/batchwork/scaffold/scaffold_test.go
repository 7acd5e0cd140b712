package scaffold

import "testing"

func TestStackName(t *testing.T) {
	for in, want := range map[string]string{"hello": "Hello", "my-job_2": "MyJob2", "9lives": "Batchwork9lives", "---": "Batchwork", "étoile": "Toile"} {
		if got := stackName(in); got != want {
			t.Errorf("stackName(%q) = %q, want %q", in, got, want)
		}
	}
}
