package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterNodes is how many masters the local Redis Cluster has: the
// fewest Redis Cluster accepts.
const ClusterNodes = 3

// clusterBusOffset is where Redis Cluster puts each node's bus: its port
// plus 10000, which must be free too.
const clusterBusOffset = 10000

// errNoRedisServer: the machine has no redis-server (or redis-cli); the
// stack runs no cluster then (miniredis has no cluster mode) and says so
// in its env file.
var errNoRedisServer = errors.New("redis-server and redis-cli are not installed")

// redisCluster is three redis-server processes in cluster mode, one
// master each, the slots spread by redis-cli --cluster create.
type redisCluster struct {
	cmds  []*exec.Cmd
	addrs []string
}

// startRedisCluster starts the cluster on ports port..port+2 (and their
// bus ports) with its data under dir, and waits until every node reports
// the cluster ok. It returns errNoRedisServer when the binaries are
// missing.
func startRedisCluster(ctx context.Context, port int, dir string, timeout time.Duration) (*redisCluster, error) {
	server, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		return nil, errNoRedisServer
	}
	c := &redisCluster{}
	for i := range ClusterNodes {
		p := port + i
		for _, q := range []int{p, p + clusterBusOffset} {
			ln, err := listen("redis-cluster", q)
			if err != nil {
				c.stop()
				return nil, err
			}
			ln.Close()
		}
		nd := filepath.Join(dir, strconv.Itoa(p))
		_ = os.RemoveAll(nd) // a fresh cluster on every start: no slot map of a previous one
		if err := os.MkdirAll(nd, 0o755); err != nil {
			c.stop()
			return nil, fmt.Errorf("redis-cluster: %w", err)
		}
		log, err := os.Create(filepath.Join(nd, "redis.log"))
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("redis-cluster: %w", err)
		}
		cmd := exec.Command(server, "--port", strconv.Itoa(p), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--dir", nd, "--save", "", "--appendonly", "no")
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		log.Close()
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("redis-cluster: start node %d: %w", p, err)
		}
		c.cmds = append(c.cmds, cmd)
		c.addrs = append(c.addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	if err := c.create(ctx, cli, timeout); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// create waits for the nodes, joins them and waits for cluster_state:ok.
func (c *redisCluster) create(ctx context.Context, cli string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.waitEach(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		return fmt.Errorf("redis-cluster: nodes not ready within %s: %w", timeout, err)
	}
	args := append(append([]string{"--cluster", "create"}, c.addrs...), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cluster: redis-cli --cluster create: %w: %s", err, out)
	}
	err := c.waitEach(ctx, func(ctx context.Context, n *redis.Client) error {
		info, err := n.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = errors.New("cluster_state is not ok")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("redis-cluster: not ok within %s: %w", timeout, err)
	}
	return nil
}

// waitEach retries check on every node until it passes or ctx ends.
func (c *redisCluster) waitEach(ctx context.Context, check func(context.Context, *redis.Client) error) error {
	for _, a := range c.addrs {
		n := redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second, MaxRetries: -1})
		for {
			err := check(ctx, n)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				n.Close()
				return fmt.Errorf("%s: %w", a, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
		n.Close()
	}
	return nil
}

// stop ends the nodes: SIGTERM, then a kill after 5 s.
func (c *redisCluster) stop() {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}
