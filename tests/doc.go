// Package tests holds the black-box tests of the hookonce binary (tests
// only): built once, driven as an operator would, through its command line,
// signals, exit codes, HTTP listeners, metrics and the files it ships
// (deploy/, docs/). They run from the repository's root (TestMain).
package tests
