// Until the command families include engine/write_path.h themselves.
#pragma once

#include "engine/write_path.h"
