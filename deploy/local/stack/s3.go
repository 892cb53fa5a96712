package stack

import (
	"fmt"
	"net"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"
)

// newS3Handler returns a gofakes3 server over dir: objects are plain files
// under dir/buckets/<bucket>/<key> (metadata under dir/metadata), so the
// Athena stand-in and the tests can read what clients upload, and files
// written there directly are served as objects. It creates the lake bucket;
// other buckets exist only once a client creates them.
func newS3Handler(dir string) (*gofakes3.GoFakeS3, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	backend, err := s3afero.MultiBucket(afero.NewBasePathFs(afero.NewOsFs(), dir))
	if err != nil {
		return nil, fmt.Errorf("s3: backend: %w", err)
	}
	exists, err := backend.BucketExists(LakeBucket)
	if err != nil {
		return nil, fmt.Errorf("s3: bucket %s: %w", LakeBucket, err)
	}
	if !exists {
		if err := backend.CreateBucket(LakeBucket); err != nil {
			return nil, fmt.Errorf("s3: create bucket %s: %w", LakeBucket, err)
		}
	}
	// No auto-bucket: like S3, a write to a bucket nobody created fails
	// with NoSuchBucket (tests that want their own bucket create it, see
	// internal/stacktest.NewBucket).
	return gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())), nil
}

// listen binds 127.0.0.1:port, naming the flag in the error so a collision
// is easy to fix.
func listen(name string, port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("%s: port %d is taken (another stack? change it with --%s-port): %w", name, port, name, err)
	}
	return ln, nil
}
