package chatprep

import (
	"encoding/binary"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// Campaign marks: what one room's risky messages share with other rooms.
// A scam script is pasted into dozens of rooms lightly varied (spaced out,
// emoji added, another account's messenger id, digits written in Hangul),
// so its text is reduced to a canonical form first and fingerprinted with
// MinHash over character shingles in LSH bands: two variants that share
// most shingles share at least one band, and each band is a mark. Each
// contact value (phone, account number, messenger id, e-mail address,
// look-alike payment host) is a mark of its own: a shared account number
// is the strongest link between rooms. Every mark is a keyed HMAC, so
// neither the text nor the contact can be recovered from what is counted
// or stored.

// The MinHash layout: CampaignBands bands of bandRows hashes each. With
// rows r and bands b, two texts whose shingle sets have Jaccard similarity
// s share a band with probability 1-(1-s^r)^b: 0.99 at s=0.9, 0.94 at 0.8,
// 0.41 at 0.5.
const (
	CampaignBands = 4
	bandRows      = 3
	shingleRunes  = 3
	// minScriptRunes is the shortest canonical text fingerprinted as a
	// script: shorter ones ("카톡 <id>") say too little to link rooms by;
	// their contact values still do.
	minScriptRunes = 10
	// MaxCampaignSightings bounds the marks one review counts: a flooded
	// room must not cost more than a bounded Redis call.
	MaxCampaignSightings = 48
)

// contactKinds are the signals whose values are contact values. Card
// numbers and resident registration numbers are left out on purpose:
// they are a victim's data, not a scammer's link between rooms.
var contactKinds = map[SignalKind]bool{
	SignalPhone: true, SignalBankAccount: true, SignalEmail: true, SignalMessengerID: true, SignalPaymentLink: true,
}

// placeholderOf is the typed placeholder a contact-like match leaves in
// the canonical text: one private-use rune per kind, so a script with
// another account's id still reads the same.
var placeholderOf = map[SignalKind]rune{
	SignalPhone: 0xE000, SignalBankAccount: 0xE001, SignalCardNumber: 0xE002, SignalResidentID: 0xE003,
	SignalEmail: 0xE004, SignalMessengerID: 0xE005, SignalURL: 0xE006, SignalPaymentLink: 0xE006,
}

// CampaignContact is one contact value of a message, canonical and raw:
// it is hashed before it goes anywhere.
type CampaignContact struct {
	Kind  SignalKind
	Value string
}

// CampaignPrint is what one message contributes to campaign counting,
// before keying. Risky is false for a message without any rule signal: it
// is not counted at all, which is what keeps phrases everyone uses ("is
// it still available?") out of the counts.
type CampaignPrint struct {
	Risky bool
	// Bands are the script's LSH band values; none when the canonical text
	// is shorter than minScriptRunes.
	Bands []uint64
	// Contacts are the message's contact values, each once.
	Contacts []CampaignContact
}

// PrintMessage fingerprints one message's text. It is pure, safe on any
// input, and costs one normalisation and one signal scan.
func PrintMessage(text string) CampaignPrint {
	n := Normalize(text)
	ms := scan(n)
	if len(ms) == 0 {
		return CampaignPrint{}
	}
	p := CampaignPrint{Risky: true}
	for _, m := range ms {
		if contactKinds[m.kind] && m.contact != "" {
			c := CampaignContact{Kind: m.kind, Value: m.contact}
			if !slices.Contains(p.Contacts, c) {
				p.Contacts = append(p.Contacts, c)
			}
		}
	}
	canon := canonicalScript(lowerSameLen(n.Text), ms)
	if len(canon) >= minScriptRunes {
		p.Bands = minHashBands(canon)
	}
	return p
}

// canonicalScript reduces a normalized, lower-cased text to what survives
// light variation: contact-like matches become their typed placeholder,
// each run of digits one '#', letters stay, repeated runes collapse to
// one, and everything else (spaces, punctuation, emoji, symbols) goes.
func canonicalScript(t string, ms []match) []rune {
	out := make([]rune, 0, len(t)/2)
	push := func(r rune) {
		if len(out) == 0 || out[len(out)-1] != r {
			out = append(out, r)
		}
	}
	for i := 0; i < len(t); {
		if m, ok := placeholderAt(ms, i); ok {
			push(placeholderOf[m.kind])
			i = max(m.end, i+1)
			continue
		}
		if n := hangulNumberLen(t[i:]); n > 0 {
			push('#')
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(t[i:])
		switch {
		case unicode.IsDigit(r):
			push('#')
		case unicode.IsLetter(r):
			push(r)
		}
		i += size
	}
	return out
}

// hangulNumberLen is the byte length of a number written in Hangul digits
// at the start of s (공일공 일이삼사, separators allowed), or 0 when fewer
// than minHangulDigits digits start it: a number the contact signals did
// not take must still read as digits, or a script with its account
// number in Hangul would look like another text.
func hangulNumberLen(s string) int {
	digits, end := 0, 0
	for i, r := range s {
		switch _, ok := hangulDigits[r]; {
		case ok:
			digits, end = digits+1, i+utf8.RuneLen(r)
		case r == ' ' || r == '-' || r == '.':
		default:
			if digits >= minHangulDigits {
				return end
			}
			return 0
		}
	}
	if digits >= minHangulDigits {
		return end
	}
	return 0
}

// minHangulDigits is the shortest run of Hangul digits read as a number:
// shorter runs are ordinary words (일이, 삼사일).
const minHangulDigits = 5

// placeholderAt returns the contact-like match starting at byte i, if any.
func placeholderAt(ms []match, i int) (match, bool) {
	for _, m := range ms {
		if _, typed := placeholderOf[m.kind]; typed && m.start == i && m.end > m.start {
			return m, true
		}
	}
	return match{}, false
}

// minHashBands is the MinHash signature of the text's shingles, folded
// into CampaignBands band values.
func minHashBands(canon []rune) []uint64 {
	var mins [CampaignBands * bandRows]uint64
	for i := range mins {
		mins[i] = ^uint64(0)
	}
	for i := 0; i+shingleRunes <= len(canon); i++ {
		base := uint64(fnvOffset)
		for _, r := range canon[i : i+shingleRunes] {
			base = (base ^ uint64(r)) * fnvPrime
		}
		for j := range mins {
			if v := mix64(base ^ minHashSeeds[j]); v < mins[j] {
				mins[j] = v
			}
		}
	}
	bands := make([]uint64, CampaignBands)
	for b := range bands {
		v := mix64(uint64(b) + 1)
		for _, m := range mins[b*bandRows : (b+1)*bandRows] {
			v = mix64(v ^ m)
		}
		bands[b] = v
	}
	return bands
}

// FNV-1a's 64-bit constants, over whole runes: a shingle's base hash.
const (
	fnvOffset = 0xCBF29CE484222325
	fnvPrime  = 0x100000001B3
)

// minHashSeeds make the MinHash functions independent; fixed, so every
// replica and every release fingerprints alike.
var minHashSeeds = func() [CampaignBands * bandRows]uint64 {
	var s [CampaignBands * bandRows]uint64
	x := uint64(0x243F6A8885A308D3) // the digits of pi: nothing up the sleeve
	for i := range s {
		x = mix64(x + 0x9E3779B97F4A7C15)
		s[i] = x
	}
	return s
}()

// mix64 is SplitMix64's finaliser: a fast, well-mixed 64-bit permutation.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// CampaignMarker keys campaign marks: 'hmac2:<24 hex>' (or 'hmac2-dev:'
// under the dev keys), an HMAC-SHA256 under the campaign key
// (pseudonym.Campaign), separated within campaigns by what is marked
// (script band, contact, room, sender). With legacy on it also gives each
// mark's pre-HKDF form ('hmac:'), so that counts and rows stored in that
// form keep matching during the transition.
type CampaignMarker struct {
	keys   *pseudonym.Keys
	legacy bool
}

// NewCampaignMarker returns a marker under keys (nil: the dev keys);
// legacy says to give the legacy forms too (SightingsWithLegacy,
// LegacyParty).
func NewCampaignMarker(keys *pseudonym.Keys, legacy bool) CampaignMarker {
	return CampaignMarker{keys: pseudonym.OrDev(keys), legacy: legacy}
}

// Legacy reports whether the marker gives the legacy forms too.
func (k CampaignMarker) Legacy() bool { return k.legacy }

// mark is the keyed mark of value under a domain.
func (k CampaignMarker) mark(domain string, value []byte) string {
	return k.keys.Sum(pseudonym.Campaign, domain, string(value))
}

// Party is the keyed pseudonym of a room or a sender as the campaign
// counter sees it: it counts distinct ones and never learns the id.
func (k CampaignMarker) Party(kind, id string) string { return k.mark(kind, []byte(id)) }

// LegacyParty is Party's legacy form.
func (k CampaignMarker) LegacyParty(kind, id string) string {
	return k.keys.Legacy(pseudonym.Campaign, kind, id)
}

// Sightings are the campaign marks of a window's messages: for every
// message with a rule signal (in order, system messages and other rooms'
// senders aside), its script bands and its contact values, each mark once
// per room with the first message that carried it, at most
// MaxCampaignSightings.
func (k CampaignMarker) Sightings(msgs []pipeline.ChatMessage) []pipeline.CampaignSighting {
	cur, _ := k.sightings(msgs, false)
	return cur
}

// SightingsWithLegacy is Sightings and, when the marker gives legacy forms,
// the same sightings in the legacy form, one for one (nil otherwise).
func (k CampaignMarker) SightingsWithLegacy(msgs []pipeline.ChatMessage) (cur, legacy []pipeline.CampaignSighting) {
	return k.sightings(msgs, k.legacy)
}

func (k CampaignMarker) sightings(msgs []pipeline.ChatMessage, withLegacy bool) (out, legacy []pipeline.CampaignSighting) {
	seen := map[string]bool{}
	// senders keys each sender once per review, not once per mark: a
	// risky message has about five marks and an HMAC is most of a mark's
	// cost.
	senders := map[string][2]string{}
	add := func(kind pipeline.CampaignKind, domain string, value []byte, m pipeline.ChatMessage) {
		mark := k.mark(domain, value)
		if seen[mark] || len(out) >= MaxCampaignSightings {
			return
		}
		seen[mark] = true
		sender, ok := senders[m.SenderID]
		if !ok {
			sender[0] = k.Party("sender", m.SenderID)
			if withLegacy {
				sender[1] = k.LegacyParty("sender", m.SenderID)
			}
			senders[m.SenderID] = sender
		}
		out = append(out, pipeline.CampaignSighting{Kind: kind, Mark: mark, MessageID: m.MessageID, Sender: sender[0]})
		if withLegacy {
			legacy = append(legacy, pipeline.CampaignSighting{Kind: kind, Mark: k.keys.Legacy(pseudonym.Campaign, domain, string(value)),
				MessageID: m.MessageID, Sender: sender[1]})
		}
	}
	for _, m := range msgs {
		if m.Kind != pipeline.KindText || m.SenderRole == pipeline.RoleSystem || m.SenderID == "" || m.Text == "" {
			continue
		}
		p := PrintMessage(m.Text)
		if !p.Risky {
			continue
		}
		for i, b := range p.Bands {
			add(pipeline.CampaignScript, "script", binary.BigEndian.AppendUint64([]byte{byte(i)}, b), m)
		}
		for _, c := range p.Contacts {
			add(pipeline.CampaignContact, "contact", []byte(string(c.Kind)+"\x00"+c.Value), m)
		}
	}
	return out, legacy
}
