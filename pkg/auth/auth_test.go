package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func key(id string, b byte) Key { return Key{ID: id, Secret: bytes.Repeat([]byte{b}, 32)} }

// alphabet is the base64url alphabet, in the order of the values.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestSignVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	old, _ := NewKeyring(key("k1", 1))
	rotated, _ := NewKeyring(key("k2", 2), key("k1", 1))
	dropped, _ := NewKeyring(key("k2", 2))
	claims := Claims{Kind: KindSeat, Subject: "p1", Game: "g1", Side: "first", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()}
	tok, err := old.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	// Another player's claims under this token's signature.
	other := claims
	other.Subject = "p2"
	otherTok, _ := old.Sign(other)
	kid, _, sig, _ := split(tok)
	_, otherPayload, _, _ := split(otherTok)
	tampered := kid + "." + otherPayload + "." + sig
	head := tok[:len(tok)-len(sig)]
	// The signature's first half, and the signature with the two unused
	// bits of its last character set: base64 that decodes to the same
	// bytes, which would give the token a second spelling.
	sigBytes, _ := b64.DecodeString(sig)
	halfSig := head + b64.EncodeToString(sigBytes[:16])
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	respelled := tok[:len(tok)-1] + string(alphabet[last|3])
	// Claims too long for a token, validly signed.
	long := claims
	long.Name = strings.Repeat("n", 4096)
	longTok, _ := old.Sign(long)
	tests := []struct {
		name    string
		ring    *Keyring
		token   string
		now     time.Time
		wantErr error
	}{
		{name: "valid", ring: old, token: tok, now: now},
		{name: "old key still verifies after rotation", ring: rotated, token: tok, now: now},
		{name: "dropped key", ring: dropped, token: tok, now: now, wantErr: ErrUnknownKey},
		{name: "expired at the second", ring: old, token: tok, now: now.Add(time.Hour), wantErr: ErrExpired},
		{name: "tampered payload", ring: old, token: tampered, now: now, wantErr: ErrBadSig},
		{name: "no signature", ring: old, token: head, now: now, wantErr: ErrBadSig},
		{name: "half a signature", ring: old, token: halfSig, now: now, wantErr: ErrBadSig},
		{name: "signature spelled another way", ring: old, token: respelled, now: now, wantErr: ErrMalformed},
		{name: "signed but too long", ring: old, token: longTok, now: now, wantErr: ErrMalformed},
		{name: "damaged payload", ring: old, token: strings.Replace(tok, ".", ".A", 1), now: now, wantErr: ErrMalformed},
		{name: "garbage in three parts", ring: old, token: "zz.yy.xx", now: now, wantErr: ErrMalformed},
		{name: "garbage under a known key id", ring: old, token: "k1.yy.xx", now: now, wantErr: ErrMalformed},
		{name: "no dots", ring: old, token: "garbage", now: now, wantErr: ErrMalformed},
		{name: "empty", ring: old, token: "", now: now, wantErr: ErrMalformed},
		{name: "oversized", ring: old, token: strings.Repeat("a", 5000), now: now, wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.ring.Verify(tt.token, tt.now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && got != claims {
				t.Fatalf("claims = %+v, want %+v", got, claims)
			}
		})
	}
	newTok, _ := rotated.Sign(claims)
	if !strings.HasPrefix(newTok, "k2.") {
		t.Fatalf("rotated ring signs with %q, want k2", newTok[:3])
	}
}

func TestNewKeyringRejectsBadKeys(t *testing.T) {
	_, err := NewKeyring(Key{ID: "", Secret: make([]byte, 32)}, Key{ID: "short", Secret: make([]byte, 31)}, key("a", 1), key("a", 2))
	if err == nil {
		t.Fatal("accepted bad keys")
	}
	for _, want := range []string{"non-empty", "at least 32", "twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not report %q", err, want)
		}
	}
}

// A key id holding a token's separator ('.') would sign tokens that no
// keyring reads back, one holding the keys flag's (':') could not be
// given: refused when the keyring is built, not at the first sign-in.
func TestKeyIDsWithoutSeparators(t *testing.T) {
	for _, id := range []string{"k.1", "k:1"} {
		if _, err := NewKeyring(key(id, 1)); err == nil || !strings.Contains(err.Error(), "without '.' or ':'") {
			t.Errorf("key id %q: %v, want refused", id, err)
		}
	}
}

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys("a:" + strings.Repeat("00", 32) + ", b:" + strings.Repeat("ff", 32))
	if err != nil || len(keys) != 2 || keys[0].ID != "a" || keys[1].Secret[0] != 0xff {
		t.Fatalf("keys=%v err=%v", keys, err)
	}
	for _, bad := range []string{"", "nocolon", "a:zz"} {
		if _, err := ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}

func FuzzVerify(f *testing.F) {
	ring, _ := NewKeyring(key("k1", 1))
	tok, _ := ring.Sign(Claims{Kind: KindGuest, Subject: "x", ExpiresAt: 1 << 40})
	f.Add(tok)
	f.Add("k1..")
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := ring.Verify(s, time.Unix(0, 0)); err == nil && s != tok {
			// A forged token that verifies would be a signature bypass.
			t.Fatalf("forged token verified: %q -> %+v", s, c)
		}
	})
}

// A key flag's errors go to logs and terminals: they must not show a
// secret, not even one in the wrong place or one character of it.
func TestParseKeysErrorsHideSecrets(t *testing.T) {
	good := "a:" + strings.Repeat("00", 32)
	const secret = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e7"
	for _, tt := range []struct{ flag, want string }{
		{good + "," + secret, "entry 2: want id:hexsecret"},
		{secret, "entry 1: want id:hexsecret"},
		{"b:" + secret + "q", "entry 1: secret is not hex"},
		{"b:" + secret + "0", "entry 1: secret is not hex"},
	} {
		_, err := ParseKeyring(tt.flag)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseKeyring: %v, want %q", err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), secret[:8]) || strings.Contains(err.Error(), "'q'") {
			t.Errorf("error %q shows the secret", err)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		header, want string
		ok           bool
	}{
		{"Bearer abc.def", "abc.def", true},
		{"bearer abc.def", "abc.def", true},
		{"BEARER  abc.def ", "abc.def", true},
		{"Basic abc", "", false},
		{"Bearerabc", "", false},
		{"Bear", "", false},
		{"", "", false},
	} {
		got, ok := BearerToken(tt.header)
		if got != tt.want || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestKindHint(t *testing.T) {
	ring, err := NewKeyring(Key{ID: "k", Secret: []byte(strings.Repeat("s", 32))})
	if err != nil {
		t.Fatal(err)
	}
	seat, err := ring.Sign(Claims{Kind: KindSeat, Game: "g", Side: "first", ExpiresAt: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	if got := KindHint(seat, KindService); !strings.Contains(got, "this is a seat credential") || !strings.Contains(got, "not a service credential") {
		t.Fatalf("a seat credential sent as a service's: %q", got)
	}
	// Each kind names every place it comes from: a rematch's seats come
	// from matchmaking as a pairing's do, and account credentials from
	// palace player-token as from a sign-in.
	for kind, source := range map[Kind]string{KindSeat: "a rematch", KindAccount: "palace player-token"} {
		if !strings.Contains(kindNames[kind], source) {
			t.Errorf("the %s credential's name %q leaves out %q", kind, kindNames[kind], source)
		}
	}
	for _, tok := range []string{seat, "", "garbage", "k.!!.sig", "k." + strings.Repeat("A", 5000) + ".s", "k.eyJrIjoibm9uZSJ9.s"} {
		want := KindSeat
		if tok != seat {
			want = KindService
		}
		if got := KindHint(tok, want); got != "" {
			t.Errorf("KindHint(%.20q, %s) = %q, want nothing", tok, want, got)
		}
	}
}

// TestARandomKeyOfAnEarlierRunIsUnknown: without keys configured each run
// signs with a random key (make run). A credential of an earlier run must
// be refused as signed with an unknown key, whose answer tells the app to
// sign in again, and not as a forged one.
func TestARandomKeyOfAnEarlierRunIsUnknown(t *testing.T) {
	earlier, ephemeral, err := KeyringFromConfig("")
	if err != nil || !ephemeral {
		t.Fatalf("KeyringFromConfig(\"\") = %v, ephemeral %v", err, ephemeral)
	}
	now := time.Now()
	tok, err := earlier.Sign(Claims{Kind: KindGuest, Subject: "guest-1", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	later, _, err := KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := later.Verify(tok, now); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a credential of an earlier run: %v, want %v", err, ErrUnknownKey)
	}
	if _, err := earlier.Verify(tok, now); err != nil {
		t.Fatalf("its own run: %v", err)
	}
}
