#!/bin/bash
set -e
mkdir -p bin secrets public/css public/img
printf '#!/bin/bash\necho building\n' > bin/build.sh
printf '#!/bin/bash\necho deploying\n' > bin/deploy.sh
printf 'helper notes\n' > bin/README.txt
chmod 644 bin/build.sh bin/deploy.sh bin/README.txt
printf 'sk-test-0000\n' > secrets/api.key
chmod 666 secrets/api.key
chmod 777 secrets
printf '<h1>hi</h1>\n' > public/index.html
printf 'body {}\n' > public/css/site.css
printf 'PNG\n' > public/img/logo.png
chmod 600 public/index.html public/css/site.css public/img/logo.png
chmod 700 public public/css public/img
