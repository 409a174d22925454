// Package auth issues and verifies Palace credentials: compact signed
// tokens (HMAC-SHA256) carrying who the holder is and what they may do.
// A Keyring signs with one key and verifies with all of its keys, so the
// signing key can be rotated without logging anyone out: add the new key,
// make it current, and drop the old one after the longest token lifetime.
package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Errors returned by Verify; callers map them to Unauthenticated.
var (
	ErrMalformed  = errors.New("credential is malformed")
	ErrBadSig     = errors.New("credential signature is invalid")
	ErrExpired    = errors.New("credential has expired")
	ErrUnknownKey = errors.New("credential was signed with an unknown key")
)

// ExpiredReason is the ErrorInfo reason of a refusal for ErrExpired, so
// that a client holding a credential it did not make (an AI worker, a
// job's) tells an expired one from a key it is not trusted with without
// reading the message.
const ExpiredReason = "CREDENTIAL_EXPIRED"

// KeyUnknownReason is the ErrorInfo reason of a refusal of a player's or
// seat's credential for ErrUnknownKey: signed with a key the service does
// not hold, as once an operator removed it. An app replaces such a
// credential (ResumeGame, a new sign-in) without reading the message, as
// it does an expired one; retrying it cannot succeed.
const KeyUnknownReason = "CREDENTIAL_KEY_UNKNOWN"

// Kind says what a token stands for.
type Kind string

const (
	// KindSeat lets its holder act for one seat of one game.
	KindSeat Kind = "seat"
	// KindGuest is a player known only by a nickname.
	KindGuest Kind = "guest"
	// KindAccount is a player signed in with an identity provider.
	KindAccount Kind = "account"
)

// Claims are the contents of a token.
type Claims struct {
	Kind    Kind   `json:"k"`
	Subject string `json:"sub"`
	// Name is the display name (guests, accounts).
	Name string `json:"n,omitempty"`
	// Game and Side are set for seat tokens; Side is "first" or "second".
	Game      string `json:"g,omitempty"`
	Side      string `json:"s,omitempty"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
}

// Expires returns the expiry as a time.
func (c Claims) Expires() time.Time { return time.Unix(c.ExpiresAt, 0) }

// Key is one HMAC key with its id.
type Key struct {
	ID     string
	Secret []byte
}

// Keyring signs with Current and verifies with any key it holds.
type Keyring struct {
	current string
	keys    map[string][]byte
}

// NewKeyring builds a keyring; the first key signs. Keys must have
// distinct, non-empty ids and secrets of at least 32 bytes.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("keyring needs at least one key")
	}
	k := &Keyring{current: keys[0].ID, keys: make(map[string][]byte, len(keys))}
	var errs []error
	for _, key := range keys {
		switch {
		case key.ID == "" || strings.ContainsAny(key.ID, ".:"):
			errs = append(errs, fmt.Errorf("key id %q must be non-empty without '.' or ':'", key.ID))
		case len(key.Secret) < 32:
			errs = append(errs, fmt.Errorf("key %q: secret must be at least 32 bytes", key.ID))
		case k.keys[key.ID] != nil:
			errs = append(errs, fmt.Errorf("key id %q appears twice", key.ID))
		default:
			k.keys[key.ID] = key.Secret
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return k, nil
}

// ParseKeys reads keys from "id:hexsecret,id2:hexsecret2", the format of
// the keys flags; the first key signs. Errors name an entry by its
// position, never by its text: a malformed entry may be all secret.
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n++
		key, err := parseKey(part)
		if err != nil {
			return nil, fmt.Errorf("signing key entry %d: %w", n, err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("no signing keys given")
	}
	return keys, nil
}

// parseKey reads one id:hexsecret entry.
func parseKey(entry string) (Key, error) {
	id, hx, ok := strings.Cut(entry, ":")
	if !ok {
		return Key{}, errors.New("want id:hexsecret")
	}
	secret, err := hex.DecodeString(hx)
	if err != nil {
		// hex's error quotes the offending character, a piece of the
		// secret; ErrLength quotes nothing.
		if errors.Is(err, hex.ErrLength) {
			return Key{}, fmt.Errorf("secret is not hex: %w", err)
		}
		return Key{}, errors.New("secret is not hex: it has a character other than 0-9, a-f")
	}
	return Key{ID: id, Secret: secret}, nil
}

// placeholderPrefix begins the secrets of the placeholder keys that the
// deployment files ship (deploy/): anyone with the repository can sign
// with them.
const placeholderPrefix = "INSECURE-"

// Placeholders lists the ids of the keys in r whose secrets are published
// placeholders.
func (r *Keyring) Placeholders() []string {
	var ids []string
	for id, secret := range r.keys {
		if bytes.HasPrefix(secret, []byte(placeholderPrefix)) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// ParseKeyring is ParseKeys and NewKeyring: the keyring of a keys flag.
func ParseKeyring(s string) (*Keyring, error) {
	keys, err := ParseKeys(s)
	if err != nil {
		return nil, err
	}
	return NewKeyring(keys...)
}

// Strict decoding: a token has exactly one spelling, so it cannot be
// altered without breaking its signature.
var b64 = base64.RawURLEncoding.Strict()

// decode reads one part of a token. Even strict decoding skips CR and LF,
// which would give a signature more spellings than one; a part with a line
// break is refused.
func decode(part string) ([]byte, error) {
	if strings.ContainsAny(part, "\r\n") {
		return nil, errors.New("line break in a token")
	}
	return b64.DecodeString(part)
}

// Sign returns a token for c. Tokens look like "keyid.payload.signature".
func (k *Keyring) Sign(c Claims) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode claims: %w", err)
	}
	head := k.current + "." + b64.EncodeToString(payload)
	return head + "." + b64.EncodeToString(mac(k.keys[k.current], head)), nil
}

// Verify checks a token's signature and expiry as of now.
func (k *Keyring) Verify(token string, now time.Time) (Claims, error) {
	kid, payload, sig, ok := split(token)
	if !ok {
		return Claims{}, ErrMalformed
	}
	// The form first: a token damaged in an app's storage is malformed,
	// not one whose key was rotated away (which tells the app to sign in
	// anew).
	got, err := decode(sig)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	c, ok := decodeClaims(payload)
	if !ok {
		return Claims{}, ErrMalformed
	}
	secret, ok := k.keys[kid]
	if !ok {
		return Claims{}, ErrUnknownKey
	}
	if !hmac.Equal(got, mac(secret, kid+"."+payload)) {
		return Claims{}, ErrBadSig
	}
	if now.Unix() >= c.ExpiresAt {
		return Claims{}, ErrExpired
	}
	return c, nil
}

// split cuts a token into its key id, payload and signature; ok is false
// for one too long or not of three parts.
func split(token string) (kid, payload, sig string, ok bool) {
	if len(token) > 4096 {
		return "", "", "", false
	}
	kid, rest, ok1 := strings.Cut(token, ".")
	payload, sig, ok2 := strings.Cut(rest, ".")
	return kid, payload, sig, ok1 && ok2
}

// decodeClaims reads a payload's claims, unverified.
func decodeClaims(payload string) (Claims, bool) {
	raw, err := decode(payload)
	if err != nil {
		return Claims{}, false
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return Claims{}, false
	}
	return c, true
}

func mac(secret []byte, msg string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// KeyringFromConfig parses --signing-keys; empty means one random key,
// which only suits a single process (tokens die with it), so the caller
// is told to warn about it.
func KeyringFromConfig(keys string) (ring *Keyring, ephemeral bool, err error) {
	if strings.TrimSpace(keys) == "" {
		secret := make([]byte, 40)
		if _, err := rand.Read(secret); err != nil {
			return nil, false, fmt.Errorf("random signing key: %w", err)
		}
		// An id of its own too, so that a credential of an earlier run
		// (make run restarted) is told apart as signed with a key unknown,
		// whose answer says to sign in again, not as a forged one.
		ring, err := NewKeyring(Key{ID: "ephemeral-" + hex.EncodeToString(secret[32:]), Secret: secret[:32]})
		return ring, true, err
	}
	ring, err = ParseKeyring(keys)
	return ring, false, err
}

// BearerToken reads the token of an authorization header value. The
// scheme is matched without regard to case (RFC 9110), as some HTTP
// clients and proxies write it "bearer".
func BearerToken(header string) (string, bool) {
	const scheme = "bearer "
	if len(header) < len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	return strings.TrimSpace(header[len(scheme):]), true
}

// Unverified returns the claims token states, without checking its
// signature or expiry: ok is false when they cannot be read. Only for
// wording a refusal, or for granting less than the claims would (a dead
// seat credential of another game holds no seat of this one).
func Unverified(token string) (c Claims, ok bool) {
	_, payload, _, ok := split(token)
	if !ok {
		return Claims{}, false
	}
	return decodeClaims(payload)
}

// kindNames words each kind of credential for a refusal.
var kindNames = map[Kind]string{
	KindSeat:    "a seat credential (one game's seat: from a pairing, an invite, a rematch, PlayAi or ResumeGame of matchmaking, or from CreateGame or IssueSeatCredentials)",
	KindGuest:   "a guest player's credential (from matchmaking's CreateGuest)",
	KindAccount: "an account player's credential (from matchmaking's SignInWithGoogle, or palace player-token)",
	KindService: "a service credential (signed with PALACE_SERVICE_KEYS, as palace service-token prints)",
}

// KindHint words, for a refusal of token, which kind of credential it
// claims to be when that is none of want: "" when it claims to be one of
// them or its claims cannot be read. The claim is not verified; it only
// says why a credential that failed verification was the wrong one to
// send.
func KindHint(token string, want ...Kind) string {
	_, payload, _, ok := split(token)
	if !ok {
		return ""
	}
	c, ok := decodeClaims(payload)
	if !ok || slices.Contains(want, c.Kind) {
		return ""
	}
	got, ok := kindNames[c.Kind]
	if !ok {
		return ""
	}
	wanted := make([]string, len(want))
	for i, k := range want {
		wanted[i] = kindNames[k]
	}
	return "this is " + got + ", not " + strings.Join(wanted, " or ")
}
