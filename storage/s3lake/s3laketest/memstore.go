package s3laketest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// MemStore is an in-memory bucket: an s3lake.CompactStore, a Lake for
// ReadLake and a Putter for s3lake.NewLake. It is safe for concurrent use.
type MemStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	failFn  func(op, key string) error
}

var _ s3lake.CompactStore = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{objects: map[string][]byte{}} }

// SetFail injects faults: fn, when not nil, is consulted before every call
// (op is "list", "get", "put" or "delete"; key the key or prefix) and its
// error returned instead.
func (m *MemStore) SetFail(fn func(op, key string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failFn = fn
}

func (m *MemStore) fail(op, key string) error {
	m.mu.Lock()
	fn := m.failFn
	m.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(op, key)
}

// ListObjects implements s3lake.CompactStore.
func (m *MemStore) ListObjects(_ context.Context, prefix string) ([]s3lake.ObjectInfo, error) {
	if err := m.fail("list", prefix); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []s3lake.ObjectInfo
	for _, k := range slices.Sorted(maps.Keys(m.objects)) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, s3lake.ObjectInfo{Key: k, Size: int64(len(m.objects[k]))})
		}
	}
	return out, nil
}

// List implements Lake.
func (m *MemStore) List(ctx context.Context, prefix string) ([]string, error) {
	objs, err := m.ListObjects(ctx, prefix)
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys, err
}

// Get implements s3lake.CompactStore.
func (m *MemStore) Get(_ context.Context, key string) ([]byte, error) {
	if err := m.fail("get", key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	if !ok {
		return nil, pipeline.Permanent(fmt.Errorf("get %s: %w", key, s3lake.ErrNotFound))
	}
	return slices.Clone(b), nil
}

// Put implements s3lake.CompactStore.
func (m *MemStore) Put(_ context.Context, key string, body []byte, _ string) error {
	if err := m.fail("put", key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = slices.Clone(body)
	return nil
}

// Delete implements s3lake.CompactStore.
func (m *MemStore) Delete(_ context.Context, keys []string) error {
	for _, k := range keys {
		if err := m.fail("delete", k); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.objects, k)
	}
	return nil
}

// RunCompactStore is the conformance suite of s3lake.CompactStore: the
// real Store against the local stack's S3 and MemStore pass the same
// checks. Keys are made under prefix, which must be empty.
func RunCompactStore(t *testing.T, store s3lake.CompactStore, prefix string) {
	t.Helper()
	ctx := t.Context()
	objs, err := store.ListObjects(ctx, prefix)
	require.NoError(t, err)
	require.Empty(t, objs, "the suite needs an empty prefix")

	put := func(key, body string) {
		t.Helper()
		require.NoError(t, store.Put(ctx, prefix+key, []byte(body), s3lake.ParquetContentType))
	}
	put("b/2", "twotwo")
	put("a/1", "one")
	put("b/1", "x")
	put("b/1", "replaced") // a second put replaces
	put("c", "outside b/")

	objs, err = store.ListObjects(ctx, prefix+"b/")
	require.NoError(t, err)
	require.Equal(t, []s3lake.ObjectInfo{{Key: prefix + "b/1", Size: 8}, {Key: prefix + "b/2", Size: 6}}, objs,
		"lexical order, sizes of the latest bytes, only under the prefix")
	got, err := store.Get(ctx, prefix+"b/1")
	require.NoError(t, err)
	require.Equal(t, "replaced", string(got))
	_, err = store.Get(ctx, prefix+"missing")
	require.ErrorIs(t, err, s3lake.ErrNotFound, "a missing key is ErrNotFound on get")

	require.NoError(t, store.Delete(ctx, []string{prefix + "b/1", prefix + "missing"}), "deleting a missing key is not an error")
	require.NoError(t, store.Delete(ctx, nil))
	objs, err = store.ListObjects(ctx, prefix)
	require.NoError(t, err)
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	require.Equal(t, []string{prefix + "a/1", prefix + "b/2", prefix + "c"}, keys)
	require.NoError(t, store.Delete(ctx, keys))
	objs, err = store.ListObjects(ctx, prefix)
	require.NoError(t, err)
	require.Empty(t, objs)
}
