package blob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// PresignGet returns a GET URL for key of the store's bucket, valid for
// ttl. Presigning is a local computation with the store's credentials and
// endpoint settings (path style on an emulator); it makes no request.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	c, ok := s.api.(*s3.Client)
	if !ok {
		return "", errors.New("presign: the store has no S3 client")
	}
	req, err := s3.NewPresignClient(c).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign s3://%s/%s: %w", s.bucket, key, err)
	}
	return req.URL, nil
}
