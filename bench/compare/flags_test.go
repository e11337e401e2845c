package main

import (
	"io"
	"testing"
	"time"
)

// Only the command line is tested here: the measurements themselves never
// run under go test.
func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 5*time.Second || o.rounds != 2 || o.conns != 32 || o.rate != 200 || o.openDur != 10*time.Second || o.out != "bench/compare/results" {
		t.Errorf("defaults = %+v", o)
	}
	o, err = parseFlags([]string{"-duration", "3s", "-rounds", "4", "-conns", "8", "-rate", "50", "-out", "x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 3*time.Second || o.rounds != 4 || o.conns != 8 || o.rate != 50 || o.out != "x" {
		t.Errorf("parsed = %+v", o)
	}
	o, err = parseFlags([]string{"-only", "PostgreSQL$", "-cpuprofile", "cpu.out", "-memprofile", "mem.out"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.only == nil || !o.only.MatchString("hookonce new events, PostgreSQL") || o.only.MatchString("hookonce pass-through") || o.cpuprof != "cpu.out" || o.memprof != "mem.out" {
		t.Errorf("parsed = %+v", o)
	}
	o, err = parseFlags([]string{"-mode", "deploy"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.mode != "deploy" || o.duration != 4*time.Second || o.rounds != 4 || o.wrkThreads != 2 {
		t.Errorf("deploy defaults = %+v", o)
	}
	o, err = parseFlags([]string{"-mode", "deploy", "-duration", "1s", "-rounds", "1"}, io.Discard)
	if err != nil || o.duration != time.Second || o.rounds != 1 {
		t.Errorf("deploy with flags = %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"-mode", "deploy", "-serve-env", "GOGC=400,GODEBUG=gctrace=1"}, io.Discard)
	if err != nil || len(o.serveEnv) != 2 || o.serveEnv[0] != "GOGC=400" || o.serveEnv[1] != "GODEBUG=gctrace=1" {
		t.Errorf("-serve-env = %q, %v", o.serveEnv, err)
	}
	for _, bad := range [][]string{{"-serve-env", "GOGC"}, {"-serve-env", "=1"}, {"-serve-env", "GOGC=400,"}, {"-mode", "x"}, {"-wrk-threads", "0"}, {"-only", "("}, {"-duration", "0s"}, {"-rounds", "0"}, {"-conns", "0"}, {"-rate", "-1"}, {"-open-duration", "0s"}, {"extra"}, {"-nope"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
