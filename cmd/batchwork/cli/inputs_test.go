package cli

import (
	"net/url"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/shared/spec"
)

// An upload's NAME is a path relative to the inputs area that a spec's
// inputs:<path> can name.
func TestCheckUploadName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, want string // want: part of the error; "" for valid
	}{
		{name: "corpus/"},
		{name: "logs/2026-11-21/part-1.txt"},
		{name: "a.txt"},
		{name: strings.Repeat("k", spec.MaxInputsPath)},
		{name: strings.Repeat("k", spec.MaxInputsPath+1), want: "at most"},
		{name: "", want: "is empty"},
		{name: "/", want: "is empty"},
		{name: "/corpus/", want: "drop the leading '/'"},
		{name: "a//b", want: "empty, '.' or '..' segment"},
		{name: "a/../b", want: "empty, '.' or '..' segment"},
		{name: "./a", want: "empty, '.' or '..' segment"},
		{name: "\xff", want: "valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := checkUploadName(c.name)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("checkUploadName(%q): %v, want none", c.name, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("checkUploadName(%q): %v, want an error containing %q", c.name, err, c.want)
			}
		})
	}
}

// A loopback API (a port forward, another user's listener) must not send
// the user's files, or requests signed with the user's credentials, to an
// S3 endpoint off this machine.
func TestUploadEndpointStaysOnThisMachine(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAREALUSERKEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	for _, c := range []struct {
		api, endpoint string
		wantErr       string
	}{
		{api: "http://127.0.0.1:8080", endpoint: "http://127.0.0.1:5000"},
		{api: "http://127.0.0.1:8080", endpoint: "https://evil.example", wantErr: "not on this machine"},
		{api: "http://127.0.0.1:8080", endpoint: "http://10.0.0.7:5000", wantErr: "not on this machine"},
	} {
		t.Run(c.endpoint, func(t *testing.T) {
			base, err := url.Parse(c.api)
			if err != nil {
				t.Fatal(err)
			}
			a := &app{api: &client.Client{Endpoint: base}}
			cl, err := a.s3Client(t.Context(), client.Identity{Endpoint: c.endpoint})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("s3Client: %v, want an error containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			creds, err := cl.Options().Credentials.Retrieve(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if creds.AccessKeyID == "AKIAREALUSERKEY" {
				t.Fatal("the emulator gets the user's real credentials")
			}
		})
	}
}
