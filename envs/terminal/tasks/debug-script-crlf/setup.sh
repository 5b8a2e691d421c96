#!/bin/bash
set -e
mkdir -p tools
printf 'reading 1\n' > data.txt
printf '#!/bin/bash\nset -e\ncd "$(dirname "$0")"\n./tools/check.sh\necho "all checks passed"\n' > run.sh
printf '#!/bin/bash\r\ntest -f data.txt\r\necho "data ok"\r\n' > tools/check.sh
chmod 755 run.sh
chmod 644 tools/check.sh
