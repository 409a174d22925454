// Package redisx builds Redis clients from one address string, for a
// standalone server, Sentinel or Redis Cluster, so that every service and
// tool takes the same --redis-addr flag, and holds back writes until
// replicas confirm them (Replication).
package redisx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ParseOptions reads an address in one of these forms:
//
//	host[:port]                                        standalone server
//	redis://[user:pass@]host:port[/db][?opts]          standalone (rediss:// for TLS)
//	redis-cluster://[user:pass@]h1:p1,h2:p2[?opts]     Redis Cluster seed nodes
//	redis-sentinel://[user:pass@]master@h1:p1,h2:p2[/db][?opts]  Sentinel with a master name
//
// Several comma-separated host:port pairs without a scheme also mean a
// cluster, and New takes one host:port of a cluster's node for that
// cluster. A missing port is 6379, or 26379 for a sentinel. opts are
// go-redis' URL query options (pool_size, dial_timeout, read_timeout,
// protocol, client_name, ...; for a cluster also max_redirects, read_only,
// route_by_latency, route_randomly). A sentinel address's user:pass serve
// the servers and the sentinels alike; sentinel_username and
// sentinel_password give the sentinels other ones (empty: none).
// Characters such as '@', ':' and '/' in a user name or password are
// written percent-encoded (%40, %3A, %2F).
//
// Errors name the address redacted (see Redact).
func ParseOptions(addr string) (*redis.UniversalOptions, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, errors.New("redis address is empty")
	}
	opts, err := parseAddr(addr)
	if err == nil {
		err = refuseNegative(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("redis address %q: %w", Redact(addr), err)
	}
	// go-redis' own default dial timeout is the same 5 s; it is set here
	// so that New's callers see one value, and only when the address gave
	// none.
	if opts.DialTimeout == 0 {
		opts.DialTimeout = defaultDialTimeout
	}
	return opts, nil
}

const (
	defaultDialTimeout  = 5 * time.Second
	defaultPort         = "6379"
	defaultSentinelPort = "26379"
)

func parseAddr(addr string) (*redis.UniversalOptions, error) {
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok {
		return parseBare(addr)
	}
	switch scheme {
	case "redis", "rediss":
		return parseRedisURL(addr)
	case "redis-cluster":
		return parseCluster(rest)
	case "redis-sentinel":
		return parseSentinel(rest)
	}
	return nil, fmt.Errorf("unknown scheme %q (use redis, rediss, redis-cluster or redis-sentinel)", scheme)
}

// parseBare reads host:port[,host:port...]: no credentials, no options.
func parseBare(addr string) (*redis.UniversalOptions, error) {
	hosts, err := parseHosts(addr, defaultPort)
	if err != nil {
		return nil, err
	}
	return &redis.UniversalOptions{Addrs: hosts, IsClusterMode: len(hosts) > 1}, nil
}

// parseRedisURL keeps everything go-redis reads from the URL, once its
// host is checked as the other forms' hosts are: go-redis takes an empty
// host for localhost and a list of hosts for one odd name.
func parseRedisURL(addr string) (*redis.UniversalOptions, error) {
	o, err := redis.ParseURL(addr)
	if err != nil {
		return nil, withoutURL(err)
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, errors.New("malformed URL")
	}
	switch {
	case u.Host == "":
		return nil, errors.New("no host")
	case strings.Contains(u.Host, ","):
		return nil, errors.New("a redis:// address names one server: use redis-cluster:// for a cluster's seeds")
	}
	if _, err := hostPort(u.Host, defaultPort); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	opts := &redis.UniversalOptions{}
	if err := copyShared(opts, o, "Network", "Addr"); err != nil {
		return nil, err
	}
	opts.Addrs = []string{o.Addr}
	return opts, nil
}

// parseCluster reads [user:pass@]h1,h2[?opts] with go-redis' cluster URL
// parser, which takes the seeds after the first as addr= options.
func parseCluster(rest string) (*redis.UniversalOptions, error) {
	loc, err := splitLocation(rest)
	if err != nil {
		return nil, err
	}
	if loc.path != "" {
		return nil, errors.New("a cluster has no database number: drop the /db")
	}
	user, hosts, err := splitCredentials(loc.authority)
	if err != nil {
		return nil, err
	}
	addrs, err := parseHosts(hosts, defaultPort)
	if err != nil {
		return nil, err
	}
	if err := refuseQuery(loc.query, "addr", "username", "password"); err != nil {
		return nil, err
	}
	loc.query["addr"] = addrs[1:]
	u := url.URL{Scheme: "redis", User: user, Host: addrs[0], RawQuery: loc.query.Encode()}
	co, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, withoutURL(err)
	}
	opts := &redis.UniversalOptions{}
	if err := copyShared(opts, co); err != nil {
		return nil, err
	}
	opts.Addrs, opts.IsClusterMode = addrs, true
	return opts, nil
}

// parseSentinel reads [user:pass@]master@h1,h2[/db][?opts] with go-redis'
// failover URL parser. That parser takes the URL's user:pass for the
// sentinels only; here they serve the servers too, as in the other forms,
// unless sentinel_username or sentinel_password say otherwise.
func parseSentinel(rest string) (*redis.UniversalOptions, error) {
	loc, err := splitLocation(rest)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(loc.authority, "@")
	if len(parts) < 2 || parts[len(parts)-2] == "" {
		return nil, errors.New("sentinel needs [user:pass@]master@host:port[,host:port]")
	}
	// The master name is the segment before the hosts; the ones before it
	// are credentials, given back to splitCredentials with the hosts.
	master, hosts := parts[len(parts)-2], parts[len(parts)-1]
	if strings.Contains(master, ":") {
		// Most likely user:pass@hosts without the master: not quoted.
		return nil, errors.New("sentinel master name may not hold ':': write [user:pass@]master@host:port[,host:port]")
	}
	if len(parts) > 2 {
		hosts = strings.Join(parts[:len(parts)-2], "@") + "@" + hosts
	}
	user, hosts, err := splitCredentials(hosts)
	if err != nil {
		return nil, err
	}
	addrs, err := parseHosts(hosts, defaultSentinelPort)
	if err != nil {
		return nil, err
	}
	db, err := parseDB(loc.path)
	if err != nil {
		return nil, err
	}
	if err := refuseQuery(loc.query, "addr", "username", "password", "master_name", "db"); err != nil {
		return nil, err
	}
	sentinelUser := sentinelCredentials(loc.query, user)
	loc.query["addr"] = addrs[1:]
	loc.query.Set("master_name", master)
	u := url.URL{Scheme: "redis", User: sentinelUser, Host: addrs[0], RawQuery: loc.query.Encode()}
	fo, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, withoutURL(err)
	}
	opts := &redis.UniversalOptions{}
	if err := copyShared(opts, fo, "SentinelAddrs"); err != nil {
		return nil, err
	}
	opts.Addrs, opts.MasterName, opts.DB = addrs, master, db
	opts.Username, opts.Password = userPassword(user)
	return opts, nil
}

// sentinelCredentials takes sentinel_username and sentinel_password out
// of q: present, even empty, they replace user for the sentinels, since a
// sentinel without requirepass refuses any password.
func sentinelCredentials(q url.Values, user *url.Userinfo) *url.Userinfo {
	if !q.Has("sentinel_username") && !q.Has("sentinel_password") {
		return user
	}
	name, pass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	if name == "" && pass == "" {
		return nil
	}
	return url.UserPassword(name, pass)
}

func userPassword(u *url.Userinfo) (name, pass string) {
	if u == nil {
		return "", ""
	}
	pass, _ = u.Password()
	return u.Username(), pass
}

func parseDB(path string) (int, error) {
	db := strings.TrimPrefix(path, "/")
	if db == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(db)
	if err != nil {
		return 0, fmt.Errorf("database %q is not a number", db)
	}
	return n, nil
}

// refuseNegative refuses the counts a URL's options make negative, which
// go-redis either panics on (a pool's size) or obeys to the letter (below
// -1, no attempt at all is made).
func refuseNegative(o *redis.UniversalOptions) error {
	for _, c := range []struct {
		name      string
		n, lowest int
	}{
		{"pool_size", o.PoolSize, 0}, {"min_idle_conns", o.MinIdleConns, 0},
		{"max_idle_conns", o.MaxIdleConns, 0}, {"max_active_conns", o.MaxActiveConns, 0},
		// -1 means none, as in go-redis.
		{"max_retries", o.MaxRetries, -1}, {"max_redirects", o.MaxRedirects, -1},
	} {
		if c.n < c.lowest {
			return fmt.Errorf("option %s %d: want %d or more", c.name, c.n, c.lowest)
		}
	}
	return nil
}

// location is an address after its scheme, cut where a URL cuts it.
type location struct {
	authority, path string
	query           url.Values
}

func splitLocation(rest string) (location, error) {
	loc := location{authority: rest}
	tail := ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		loc.authority, tail = rest[:i], rest[i:]
	}
	path, rawQuery, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		// Not wrapped: its text quotes the query, which may hold a
		// sentinel_password.
		return location{}, errors.New("malformed query options")
	}
	loc.path, loc.query = path, q
	return loc, nil
}

// splitCredentials cuts an optional user:pass@ off a host list.
func splitCredentials(authority string) (*url.Userinfo, string, error) {
	creds, hosts, ok := strings.Cut(authority, "@")
	if !ok {
		return nil, authority, nil
	}
	if strings.Contains(hosts, "@") {
		return nil, "", errors.New("more than one '@': write an '@' in a user name or password as %40")
	}
	name, pass, hasPass := strings.Cut(creds, ":")
	name, err1 := url.PathUnescape(name)
	pass, err2 := url.PathUnescape(pass)
	if err1 != nil || err2 != nil {
		// Not wrapped: the unescape error quotes the password.
		return nil, "", errors.New("malformed percent-encoding in user:pass")
	}
	if !hasPass {
		return url.User(name), hosts, nil
	}
	return url.UserPassword(name, pass), hosts, nil
}

// parseHosts splits a comma-separated host list and gives every host a
// port. Errors name hosts by position: a malformed entry may be a
// misplaced password.
func parseHosts(list, port string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("no host")
	}
	var out []string
	for i, h := range strings.Split(list, ",") {
		hp, err := hostPort(strings.TrimSpace(h), port)
		if err != nil {
			return nil, fmt.Errorf("host %d: %w", i+1, err)
		}
		out = append(out, hp)
	}
	return out, nil
}

func hostPort(h, defPort string) (string, error) {
	switch {
	case h == "":
		return "", errors.New("empty (stray comma?)")
	case strings.Contains(h, "@"):
		return "", errors.New("contains '@': credentials go first, as user:pass@h1,h2, and only where the form allows them")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) && ae.Err == "missing port in address" {
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defPort
		} else {
			return "", errors.New("not host:port")
		}
	}
	if host == "" {
		return "", errors.New("empty host name")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", errors.New("port is not a number from 0 to 65535")
	}
	return net.JoinHostPort(host, port), nil
}

// refuseQuery rejects options that the address already says otherwise.
func refuseQuery(q url.Values, names ...string) error {
	for _, n := range names {
		if q.Has(n) {
			return fmt.Errorf("option %s: give it in the address itself, not as ?%s=", n, n)
		}
	}
	return nil
}

// withoutURL keeps an error's reason but not its text when it may quote
// the address: url.Parse's errors hold the whole URL, password included,
// or pieces of a malformed one.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New("malformed URL (percent-encode '@', ':', '/' and '?' in a user name or password)")
	}
	return err
}

// copyShared sets every field of dst that src (a go-redis options struct)
// has with the same name and type. go-redis converts UniversalOptions to
// the others but not back, and a copy by hand loses whatever options it
// forgets, as an earlier one here lost the URL's pool and timeouts.
// Another field of src that the URL set (not zero, not in handled) has no
// place in dst: that is an error, not an option silently dropped.
func copyShared(dst *redis.UniversalOptions, src any, handled ...string) error {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range s.NumField() {
		f := s.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		df := d.FieldByName(f.Name)
		switch {
		case df.IsValid() && df.CanSet() && df.Type() == f.Type:
			df.Set(s.Field(i))
		case !s.Field(i).IsZero() && !slices.Contains(handled, f.Name):
			return fmt.Errorf("option for %s is not supported with this form of address", f.Name)
		}
	}
	return nil
}

// Redact returns addr fit for logs and errors: the password of its
// user:pass@ and the values of password options are replaced by xxxxx.
// It does not need a valid address, so that a parse error can name one.
func Redact(addr string) string {
	addr = strings.TrimSpace(addr)
	prefix, rest := "", addr
	if scheme, r, ok := strings.Cut(addr, "://"); ok {
		prefix, rest = scheme+"://", r
	}
	// Everything before the last '@' is credentials, but a sentinel's
	// last segment before the hosts is its master name. A password with
	// an unencoded '@' spans several segments; all of them are hidden.
	segs := strings.Split(rest, "@")
	keep := 1
	if prefix == "redis-sentinel://" && !strings.Contains(segs[max(len(segs)-2, 0)], ":") {
		// A master name holds no ':'; a segment that does is credentials
		// whose master was left out.
		keep = 2
	}
	if len(segs) > keep {
		creds := strings.Join(segs[:len(segs)-keep], "@")
		rest = redactCreds(creds) + "@" + strings.Join(segs[len(segs)-keep:], "@")
	}
	return prefix + redactQuery(rest)
}

// redactCreds keeps the user name of user:pass, like url.URL.Redacted;
// without a ':' the whole may be a password.
func redactCreds(creds string) string {
	if name, _, ok := strings.Cut(creds, ":"); ok && !strings.ContainsAny(name, "/?") {
		return name + ":xxxxx"
	}
	return "xxxxx"
}

func redactQuery(s string) string {
	base, raw, ok := strings.Cut(s, "?")
	if !ok {
		return s
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return base + "?xxxxx"
	}
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q[k] = []string{"xxxxx"}
		}
	}
	return base + "?" + q.Encode()
}

// clusterReload is how old a Redis Cluster client's map of the slots may
// grow while commands run. A master that dies answers no MOVED: its
// connections are refused, and only a reload of the map finds the replica
// promoted in its place. go-redis reloads every 60 s by default, so a
// failover kept that master's games, streams, clocks and queues down for
// up to a minute after the promotion.
const clusterReload = 2 * time.Second

// New connects to addr (see ParseOptions) and checks the connection with
// a PING, so a wrong address fails at start-up rather than at the first
// move.
func New(ctx context.Context, addr string) (redis.UniversalClient, error) {
	opts, err := ParseOptions(addr)
	if err != nil {
		return nil, err
	}
	return connect(ctx, addr, opts)
}

// NewForWaiting is New for conns callers that each hold a connection
// while they wait (blocking reads): its pool holds conns connections
// beyond the usual, and they are named for CLIENT LIST after the
// address's client_name, with "-" and name after it, so that an operator
// tells them from the others.
func NewForWaiting(ctx context.Context, addr string, conns int, name string) (redis.UniversalClient, error) {
	opts, err := ParseOptions(addr)
	if err != nil {
		return nil, err
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 10 * runtime.GOMAXPROCS(0) // go-redis' own default
	}
	opts.PoolSize += conns
	if opts.ClientName != "" {
		name = opts.ClientName + "-" + name
	}
	opts.ClientName = name
	// go-redis sends a command again when its connection breaks before
	// the answer, which Redis may have run all the same: a read that takes
	// (XREADGROUP >, XAUTOCLAIM) would take the next entry, the one its
	// lost answer held left with the caller, who never learns of it. The
	// caller sees the failure instead, and looks for what it may hold.
	opts.MaxRetries = -1
	return connect(ctx, addr, opts)
}

func connect(ctx context.Context, addr string, opts *redis.UniversalOptions) (redis.UniversalClient, error) {
	var c redis.UniversalClient
	if opts.MasterName == "" && (opts.IsClusterMode || len(opts.Addrs) > 1) {
		c = clusterClient(opts, "")
	} else {
		c = redis.NewUniversalClient(opts)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis at %s: %w", Redact(addr), err)
	}
	if _, plain := c.(*redis.Client); plain && opts.MasterName == "" && c.ClusterInfo(pctx).Err() == nil {
		// One node of a cluster, given as host:port (a managed cluster's
		// endpoint, say): a plain client would be answered MOVED for every
		// key of another master's slots.
		copts := *opts
		copts.IsClusterMode = true
		cc, err := connect(ctx, addr, &copts)
		if err == nil {
			_ = c.Close()
			return cc, nil
		}
		// Out of reach at the addresses the nodes announce (a port
		// published or forwarded): a node that serves every slot itself
		// serves every key as given. It gets a cluster client all the
		// same, every slot at this address: the node refuses a script or
		// transaction whose keys lie in several slots, and callers tell
		// a cluster by its client.
		if servesEverySlot(ctx, c) {
			_ = c.Close()
			cc := clusterClient(opts, opts.Addrs[0])
			// The attempt above may have spent pctx on announced
			// addresses that never answer.
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := cc.Ping(ctx).Err(); err != nil {
				_ = cc.Close()
				return nil, fmt.Errorf("redis at %s: %w", Redact(addr), err)
			}
			return cc, nil
		}
		_ = c.Close()
		return nil, fmt.Errorf("%w (a node of a Redis Cluster: this process must reach each of its masters at the address it announces)", err)
	}
	return c, nil
}

// clusterClient is a cluster client of opts. Given pinned, a node's
// address, it takes every slot for that node's, whatever the nodes
// announce (CLUSTER SLOTS), and dials that address for every node, since
// go-redis rewrites a loopback address of a slot map it is given
// (127.0.0.2:port, [::1]:port) into one that reaches 127.0.0.1.
func clusterClient(opts *redis.UniversalOptions, pinned string) *redis.ClusterClient {
	copts := opts.Cluster()
	copts.ClusterStateReloadInterval = clusterReload
	if pinned != "" {
		here := []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: pinned}}}}
		copts.ClusterSlots = func(context.Context) ([]redis.ClusterSlot, error) { return here, nil }
		// DialTimeout is set: ParseOptions gives it a default.
		dial := redis.NewDialer(&redis.Options{DialTimeout: copts.DialTimeout, TLSConfig: copts.TLSConfig})
		copts.Dialer = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dial(ctx, network, pinned)
		}
	}
	if opts.MaxRetries < 0 {
		copts.NewClient = func(o *redis.Options) *redis.Client {
			nc := redis.NewClient(o)
			nc.AddHook(sentOnce{})
			return nc
		}
	}
	return redis.NewClusterClient(copts)
}

// sentOnce makes a cluster node's client heed MaxRetries -1: go-redis'
// cluster client sends a command again after its connection broke
// (up to MaxRedirects times, whatever MaxRetries says), though Redis may
// have run it. Such a failure is reported as connectionLost, which it
// does not send again on; Redis' own answers (MOVED, ASK, TRYAGAIN) and
// failures before sending (a dial, a closed or full pool) pass as they
// are.
type sentOnce struct{}

func (sentOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook converts as ProcessHook does: the cluster client
// follows ASK with a pipeline of ASKING and the command. (Its own
// pipelines choose their retries before a node's hook returns: the
// workers' are safe to send twice.)
func (sentOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !mayHaveRun(err) {
			return err
		}
		lost := &connectionLost{err: err.Error()}
		for _, c := range cmds {
			if mayHaveRun(c.Err()) {
				c.SetErr(lost)
			}
		}
		return lost
	}
}

func (sentOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if !mayHaveRun(err) {
			return err
		}
		lost := &connectionLost{err: err.Error()}
		cmd.SetErr(lost)
		return lost
	}
}

// mayHaveRun reports whether err is a connection's failure after the
// command may have been sent.
func mayHaveRun(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's own end, which it reads as such
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op != "dial"
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// connectionLost is a connection's failure after a command may have run.
type connectionLost struct{ err string }

func (e *connectionLost) Error() string {
	return "connection lost; the command may have run, and is not sent again: " + e.err
}

// servesEverySlot reports whether the cluster node c reaches is the
// master of every slot.
func servesEverySlot(ctx context.Context, c redis.UniversalClient) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	me, err := c.ClusterMyID(ctx).Result()
	if err != nil {
		return false
	}
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return false
	}
	served := 0
	for _, r := range ranges {
		if len(r.Nodes) == 0 || r.Nodes[0].ID != me {
			return false
		}
		served += r.End - r.Start + 1
	}
	return served == 16384
}

// OutOfReach reports whether err, from New, may mend by itself: Redis
// did not answer (not started yet, restarting, its name not yet known),
// or answered that it cannot serve yet (loading its data, a cluster
// without a master for a slot). An answer that refuses the connection
// (a wrong password, a missing permission) does not mend.
func OutOfReach(err error) bool {
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		// Its certificate will not change by waiting.
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	for _, p := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// CheckKeyPrefix refuses a key prefix with a brace. Redis Cluster hashes
// only the first {...} of a key, so a prefix holding one would put every
// key of a deployment (each game's, each queue's) in one slot, where the
// keys are laid out to spread over all of them.
func CheckKeyPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("key prefix %q must not contain '{' or '}' (Redis Cluster would hash every key by it, into one slot)", prefix)
	}
	return nil
}
