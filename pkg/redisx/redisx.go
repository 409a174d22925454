// Package redisx builds Redis clients from one address string, for a
// standalone server, Sentinel or Redis Cluster, so that every service and
// tool takes the same --redis-addr flag, and holds back writes until
// replicas confirm them (Replication).
package redisx

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ParseOptions reads an address in one of these forms:
//
//	host:port                       standalone server
//	redis://[user:pass@]host:port[/db]  standalone (rediss:// for TLS)
//	redis-cluster://h1:p1,h2:p2     Redis Cluster seed nodes
//	redis-sentinel://master@h1:p1,h2:p2[/db]  Sentinel with a master name
//
// Several comma-separated host:port pairs without a scheme also mean a
// cluster.
func ParseOptions(addr string) (*redis.UniversalOptions, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, errors.New("redis address is empty")
	}
	opts := &redis.UniversalOptions{}
	switch {
	case strings.HasPrefix(addr, "redis://"), strings.HasPrefix(addr, "rediss://"):
		o, err := redis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redis address %q: %w", addr, err)
		}
		opts.Addrs = []string{o.Addr}
		opts.Username, opts.Password, opts.DB, opts.TLSConfig = o.Username, o.Password, o.DB, o.TLSConfig
	case strings.HasPrefix(addr, "redis-cluster://"):
		hosts := strings.TrimPrefix(addr, "redis-cluster://")
		opts.Addrs = splitHosts(hosts)
		opts.IsClusterMode = true
	case strings.HasPrefix(addr, "redis-sentinel://"):
		rest := strings.TrimPrefix(addr, "redis-sentinel://")
		master, hosts, ok := strings.Cut(rest, "@")
		if !ok || master == "" {
			return nil, fmt.Errorf("redis address %q: sentinel needs master@host:port[,host:port]", addr)
		}
		if h, db, ok := strings.Cut(hosts, "/"); ok {
			n, err := strconv.Atoi(db)
			if err != nil {
				return nil, fmt.Errorf("redis address %q: database %q is not a number", addr, db)
			}
			hosts, opts.DB = h, n
		}
		opts.MasterName = master
		opts.Addrs = splitHosts(hosts)
	case strings.Contains(addr, "://"):
		u, _ := url.Parse(addr)
		scheme := "?"
		if u != nil {
			scheme = u.Scheme
		}
		return nil, fmt.Errorf("redis address %q: unknown scheme %q (use redis, rediss, redis-cluster or redis-sentinel)", addr, scheme)
	default:
		opts.Addrs = splitHosts(addr)
		opts.IsClusterMode = len(opts.Addrs) > 1
	}
	if len(opts.Addrs) == 0 {
		return nil, fmt.Errorf("redis address %q: no host", addr)
	}
	opts.DialTimeout = 5 * time.Second
	return opts, nil
}

func splitHosts(s string) []string {
	var out []string
	for h := range strings.SplitSeq(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// New connects to addr (see ParseOptions) and checks the connection with
// a PING, so a wrong address fails at start-up rather than at the first
// move.
func New(ctx context.Context, addr string) (redis.UniversalClient, error) {
	opts, err := ParseOptions(addr)
	if err != nil {
		return nil, err
	}
	c := redis.NewUniversalClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	return c, nil
}
