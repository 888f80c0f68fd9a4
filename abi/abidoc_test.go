package abi

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The header example of ABI.md section 8 is what AppendHeader writes, and
// the offsets its text reads out of it are the dump's.
func TestABIDocHeaderExample(t *testing.T) {
	sec := docSection(t, "## 8. The event header", "## 9.")
	got := hexDumpIn(t, sec)
	h := Header{Type: EventUpdate, Flags: FlagHasOldObject, Fields: [HeaderFieldCount]string{
		"pods", "", "v1", "pods", "Pod", "default", "web-0", "u1", "5"}}
	if want := AppendHeader(nil, &h); !bytes.Equal(got, want) {
		t.Fatalf("the dump is not AppendHeader's:\n got %x\nwant %x", got, want)
	}
	m := regexp.MustCompile("the name's offset, here\\s+`0x([0-9a-f]+)`\\) and at 60 \\(its length, (\\d+)\\)").FindStringSubmatch(sec)
	if m == nil {
		t.Fatal("section 8 no longer says where the name is")
	}
	off, _ := strconv.ParseUint(m[1], 16, 32)
	n, _ := strconv.Atoi(m[2])
	if o := binary.LittleEndian.Uint32(got[56:]); uint64(o) != off {
		t.Errorf("the text says the name's offset is 0x%x; the dump says 0x%x", off, o)
	}
	if l := binary.LittleEndian.Uint32(got[60:]); int(l) != n {
		t.Errorf("the text says the name's length is %d; the dump says %d", n, l)
	}
}

// docSection returns ABI.md from the heading start to the next heading end.
func docSection(t *testing.T, start, end string) string {
	t.Helper()
	doc, err := os.ReadFile("ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	i := strings.Index(sec, start)
	if i < 0 {
		t.Fatalf("ABI.md has no %q", start)
	}
	sec = sec[i:]
	if j := strings.Index(sec, end); j >= 0 {
		sec = sec[:j]
	}
	return sec
}

// hexDumpIn returns the bytes of the first hex dump (hexdump -C's layout)
// in sec.
func hexDumpIn(t *testing.T, sec string) []byte {
	t.Helper()
	start := strings.Index(sec, "```\n00000000")
	if start < 0 {
		t.Fatal("no hex dump")
	}
	dump := sec[start+4:]
	dump = dump[:strings.Index(dump, "```")]
	var got []byte
	for _, line := range strings.Split(strings.TrimSpace(dump), "\n") {
		hexPart := line[10:]
		if i := strings.Index(hexPart, "|"); i >= 0 {
			hexPart = hexPart[:i]
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(hexPart), ""))
		if err != nil {
			t.Fatalf("dump line %q: %v", line, err)
		}
		got = append(got, b...)
	}
	return got
}

// Section 18's example header is what the host writes for that key.
func TestABIDocReconcileHeaderExample(t *testing.T) {
	got := hexDumpIn(t, docSection(t, "### 18.2 ", "### 18.3 "))
	h := Header{Type: EventReconcile, Flags: FlagAbsent, Fields: [HeaderFieldCount]string{
		"cronjobs", "batch.tutorial.kubebuilder.io", "v1", "cronjobs", "CronJob", "default", "nightly", "", ""}}
	if want := AppendHeader(nil, &h); !bytes.Equal(got, want) {
		t.Fatalf("the dump is not AppendHeader's:\n got %x\nwant %x", got, want)
	}
}

// Every Zig sketch that uses std imports it.
func TestABIDocZigImportsStd(t *testing.T) {
	doc, err := os.ReadFile("ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```zig\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) == 0 {
		t.Fatal("no Zig sketch")
	}
	for _, b := range blocks {
		if strings.Contains(b[1], "std.") && !strings.Contains(b[1], `const std = @import("std");`) {
			t.Errorf("a Zig sketch uses std without importing it:\n%s", b[1])
		}
	}
}

// Every import of abi.Imports is in ABI.md section 6's tables, with its
// signature (parameter names aside).
func TestABIDocImportsTable(t *testing.T) {
	doc, err := os.ReadFile("ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start, end := strings.Index(text, "\n## 6. Imports"), strings.Index(text, "\n## 7. ")
	if start < 0 || end < start {
		t.Fatal("no section 6")
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| `([^`]+)` \\|").FindAllStringSubmatch(text[start:end], -1) {
		rows[m[1]] = regexp.MustCompile(`\w+: `).ReplaceAllString(m[2], "")
	}
	for _, f := range Imports() {
		got, ok := rows[f.Name]
		if !ok {
			t.Errorf("%s is not in section 6's tables", f.Name)
		} else if got != f.Signature.String() {
			t.Errorf("%s: section 6 says %s, abi.Imports %s", f.Name, got, f.Signature)
		}
	}
}
