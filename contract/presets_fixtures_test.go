package contract_test

import (
	"os"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// The providers' own example payloads (contract/testdata/providers, with
// their sources and licences): keys and hashes as the presets read them.

func fixture(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/providers/" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGitHubFixtures: octokit's examples of an issues event and a push. One
// delivery id sent to a repository hook and to an app's hook is two keys;
// a redelivery to one of them (same hook, same delivery, same body) is
// that hook's key and hash again.
func TestGitHubFixtures(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	s := mustSender(t, "preset: github", "signature: {secret_env: HOOKONCE_OK}")
	read := func(file, hook, delivery string) (string, string) {
		return keyAndHash(t, s, fixture(t, file), "X-GitHub-Hook-ID", hook, "X-GitHub-Delivery", delivery)
	}
	for _, file := range []string{"github/issues-opened.json", "github/push-with-installation.json"} {
		repoKey, repoHash := read(file, "109948940", "9c4d4a40-2f4d-11ef-8c36-0e8a1b9e1c5d")
		appKey, _ := read(file, "382930291", "9c4d4a40-2f4d-11ef-8c36-0e8a1b9e1c5d")
		if repoKey == appKey {
			t.Errorf("%s: two hooks share the key %q", file, repoKey)
		}
		if k, h := read(file, "109948940", "9c4d4a40-2f4d-11ef-8c36-0e8a1b9e1c5d"); k != repoKey || h != repoHash {
			t.Errorf("%s: a redelivery gets %q %s, the first %q %s", file, k, h, repoKey, repoHash)
		}
		if k, _ := read(file, "109948940", "0b989ba4-242f-11e5-81e1-c7b6966d2516"); k == repoKey {
			t.Errorf("%s: another event to the same hook shares the key", file)
		}
	}
}

// TestStripeFixture: Stripe's OpenAPI fixture of the Event object. A retry
// that differs only in pending_webhooks has the event's key and hash.
func TestStripeFixture(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	s := mustSender(t, "preset: stripe", "signature: {secret_env: HOOKONCE_OK}")
	body := fixture(t, "stripe/event.json")
	if !strings.Contains(body, `"pending_webhooks": 0`) {
		t.Fatal("the fixture's pending_webhooks moved")
	}
	read := func(body string) (string, string) { return keyAndHash(t, s, body) }
	key, hash := read(body)
	if key != "evt_1Pgc76B7WZ01zgkWwyRHS12y" {
		t.Errorf("key %q", key)
	}
	if k, h := read(strings.Replace(body, `"pending_webhooks": 0`, `"pending_webhooks": 3`, 1)); k != key || h != hash {
		t.Errorf("a retry with pending_webhooks 3: %q %s, want %q %s", k, h, key, hash)
	}
	if _, h := read(strings.Replace(body, `"amount": 2000`, `"amount": 2001`, 1)); h == hash {
		t.Error("another amount under the event's id hashes alike")
	}
	// The fixture's api_version is null (an event rendered before Stripe
	// stamped versions): the key is the id alone. Rendered for an
	// endpoint with a version, the version joins the key, so the two
	// endpoints of an API-version upgrade on one URL get two keys.
	if !strings.Contains(body, `"api_version": null`) {
		t.Fatal("the fixture's api_version moved")
	}
	older, _ := read(strings.Replace(body, `"api_version": null`, `"api_version": "2024-06-20"`, 1))
	newer, _ := read(strings.Replace(body, `"api_version": null`, `"api_version": "2025-03-31.basil"`, 1))
	if older != key+":2024-06-20" || newer != key+":2025-03-31.basil" {
		t.Errorf("keys in two API versions: %q and %q", older, newer)
	}
}

// keyAndHash reads the key and payload hash of a JSON POST to /hook with
// headers kv, as s sees it.
func keyAndHash(t *testing.T, s *contract.Sender, body string, kv ...string) (key, hash string) {
	t.Helper()
	req := delivery(t, "POST", "/hook", "application/json", body, "", kv...)
	key, err := s.Key(req)
	if err != nil {
		t.Fatal(err)
	}
	if hash, _, err = s.RequestHash(req); err != nil {
		t.Fatal(err)
	}
	return key, hash
}
