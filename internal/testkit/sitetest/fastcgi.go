package sitetest

// fastcgiParams is nginx's fastcgi_params as Debian 12 ships it (less the
// comments), so that configurations written for /etc/nginx run unchanged.
const fastcgiParams = `fastcgi_param  QUERY_STRING       $query_string;
fastcgi_param  REQUEST_METHOD     $request_method;
fastcgi_param  CONTENT_TYPE       $content_type;
fastcgi_param  CONTENT_LENGTH     $content_length;

fastcgi_param  SCRIPT_NAME        $fastcgi_script_name;
fastcgi_param  REQUEST_URI        $request_uri;
fastcgi_param  DOCUMENT_URI       $document_uri;
fastcgi_param  DOCUMENT_ROOT      $document_root;
fastcgi_param  SERVER_PROTOCOL    $server_protocol;
fastcgi_param  REQUEST_SCHEME     $scheme;
fastcgi_param  HTTPS              $https if_not_empty;

fastcgi_param  GATEWAY_INTERFACE  CGI/1.1;
fastcgi_param  SERVER_SOFTWARE    nginx/$nginx_version;

fastcgi_param  REMOTE_ADDR        $remote_addr;
fastcgi_param  REMOTE_PORT        $remote_port;
fastcgi_param  REMOTE_USER        $remote_user;
fastcgi_param  SERVER_ADDR        $server_addr;
fastcgi_param  SERVER_PORT        $server_port;
fastcgi_param  SERVER_NAME        $server_name;

fastcgi_param  REDIRECT_STATUS    200;
`

// fastcgiFiles are written into every nginx conf directory this package
// makes: Debian's fastcgi_params, fastcgi.conf and snippets/fastcgi-php.conf.
var fastcgiFiles = map[string]string{
	"fastcgi_params": fastcgiParams,
	"fastcgi.conf":   "fastcgi_param  SCRIPT_FILENAME    $document_root$fastcgi_script_name;\n" + fastcgiParams,
	// The PHP location's body on Debian: split at the first ".php/" (a
	// lazy .+?: "/a.php/b.php/c" runs /a.php with PATH_INFO /b.php/c), 404
	// unless the script exists, PATH_INFO kept past try_files.
	"snippets/fastcgi-php.conf": `fastcgi_split_path_info ^(.+?\.php)(/.*)$;
try_files $fastcgi_script_name =404;
set $path_info $fastcgi_path_info;
fastcgi_param PATH_INFO $path_info;
fastcgi_index index.php;
include fastcgi.conf;
`,
}
