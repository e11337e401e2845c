package dedupe_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
)

func TestRedactDSN(t *testing.T) {
	cases := []struct {
		dsn, want string
		secrets   []string // must not survive (the want says what does)
	}{
		// URL userinfo.
		{"postgres://u:pw1@db.internal:5432/hook?sslmode=require", "postgres://u:xxxxx@db.internal:5432/hook?sslmode=require", []string{"pw1"}},
		{"postgresql://u:p%40ss@h/db", "postgresql://u:xxxxx@h/db", []string{"p%40ss"}},
		{"postgres://u:p@ss/wo?rd@h/db", "postgres://u:xxxxx@h/db", []string{"ss/wo", "rd"}},
		{"postgres://u:@h/db", "postgres://u:xxxxx@h/db", nil},
		{"postgres://u@h/db", "postgres://u@h/db", nil},
		{"postgres://h1,h2/db", "postgres://h1,h2/db", nil},
		{"redis://:rpw@cache:6379/0", "redis://:xxxxx@cache:6379/0", []string{"rpw"}},
		{"redis://default:rpw2@cache:6379", "redis://default:xxxxx@cache:6379", []string{"rpw2"}},
		{"rediss+sentinel://:spw@s1:26379?master_name=m&addr=s2:26379&sentinel_password=spw2",
			"rediss+sentinel://:xxxxx@s1:26379?master_name=m&addr=s2:26379&sentinel_password=xxxxx", []string{"spw"}},
		// Query parameters.
		{"postgres://u@h/db?password=qpw&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable", []string{"qpw"}},
		{"postgres://u@h/db?sslmode=verify-full&sslpassword=kpw", "postgres://u@h/db?sslmode=verify-full&sslpassword=xxxxx", []string{"kpw"}},
		{"postgres://u@h/db?PassWord=a%26b&x=1", "postgres://u@h/db?PassWord=xxxxx&x=1", []string{"a%26b"}},
		{"postgres://u@h/db?password=a&b&x=1", "postgres://u@h/db?password=xxxxx&x=1", []string{"a&b"}},
		{"postgres://u@h/db?pass%77ord=enc", "postgres://u@h/db?pass%77ord=xxxxx", []string{"enc"}},
		{"redis://cache:6379?password=rq&db=2", "redis://cache:6379?password=xxxxx&db=2", []string{"rq"}},
		{"postgres://u:pw@h/db?password=two", "postgres://u:xxxxx@h/db?password=xxxxx", []string{"pw", "two"}},
		// Keyword/value DSNs.
		{"host=h port=5432 user=u password=kv1 dbname=d", "host=h port=5432 user=u password=xxxxx dbname=d", []string{"kv1"}},
		{"host=h password = 'a b\\' c' dbname=d", "host=h password=xxxxx dbname=d", []string{"a b", "c'"}},
		{"password='unterminated secret", "password=xxxxx", []string{"unterminated", "secret"}},
		{"host=h sslpassword=kv2", "host=h sslpassword=xxxxx", []string{"kv2"}},
		{"Server=h;Password=ado;Database=d", "Server=h;Password=xxxxx", []string{"ado"}},
		{"host=h\tpassword=tab\nuser=u", "host=h\tpassword=xxxxx\nuser=u", []string{"tab"}},
		// Not a URL, yet with a userinfo.
		{"u:bare@h:6379", "u:xxxxx@h:6379", []string{"bare"}},
		{"mysql u:p=w@h", "mysql u:xxxxx@h", []string{"p=w"}},
		// Nothing to hide.
		{"sqlite:/data/a@b:c.db", "sqlite:/data/a@b:c.db", nil},
		{"sqlite:/var/lib/hookonce/h.db", "sqlite:/var/lib/hookonce/h.db", nil},
		{"sqlite:hookonce.db", "sqlite:hookonce.db", nil},
		{"", "", nil},
	}
	for _, c := range cases {
		t.Run(c.dsn, func(t *testing.T) {
			got := dedupe.RedactDSN(c.dsn)
			if got != c.want {
				t.Errorf("RedactDSN(%q) = %q, want %q", c.dsn, got, c.want)
			}
			for _, s := range c.secrets {
				if strings.Contains(got, s) {
					t.Errorf("RedactDSN(%q) = %q keeps %q", c.dsn, got, s)
				}
			}
			if again := dedupe.RedactDSN(got); again != got {
				t.Errorf("RedactDSN is not idempotent: %q → %q", got, again)
			}
		})
	}
}

// Whatever the password, in whichever place a DSN can hold one (escaped as
// the driver wants it there), RedactDSN's output does not contain it.
func FuzzRedactDSN(f *testing.F) {
	for _, p := range []string{"s3cret", "p@ss/word?x", "with space", `quo'te\back`, "a&b=c", "ünïcødé-pass"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if len(p) < 6 || strings.ContainsAny(p, "\x00") {
			t.Skip()
		}
		kv := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(p)
		forms := []string{
			"postgres://u:" + url.PathEscape(p) + "@h:5432/db?sslmode=disable",
			"postgres://u:" + p + "@h:5432/db",
			"postgres://u@h/db?password=" + url.QueryEscape(p) + "&sslmode=disable",
			"postgres://u@h/db?sslmode=disable&sslpassword=" + url.QueryEscape(p),
			"redis://:" + url.PathEscape(p) + "@cache:6379/0",
			"redis://user:" + p + "@cache:6379",
			"host=h user=u password='" + kv + "' dbname=d",
		}
		if !strings.Contains("u:"+p, "://") { // else it reads as a URL of scheme u
			forms = append(forms, "u:"+p+"@h:6379")
		}
		if !strings.ContainsAny(p, " \t\r\n'\"") {
			forms = append(forms, "host=h user=u password="+p+" dbname=d")
		}
		for _, dsn := range forms {
			template := strings.Replace(dsn, p, "", 1)
			got := dedupe.RedactDSN(dsn)
			for _, shown := range []string{p, url.PathEscape(p), url.QueryEscape(p), kv} {
				if len(shown) >= 6 && !strings.Contains(template, shown) && strings.Contains(got, shown) {
					t.Fatalf("RedactDSN(%q) = %q shows the password %q", dsn, got, shown)
				}
			}
		}
	})
}
