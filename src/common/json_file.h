/* json_file.h - load a whole JSON file with cJSON, with a one-line error
 * naming the file (missing, unreadable, too large, or invalid JSON with the
 * byte offset of the problem). */
#ifndef HFQ_SRC_COMMON_JSON_FILE_H
#define HFQ_SRC_COMMON_JSON_FILE_H

#include <cjson/cJSON.h>

#include "formats/error.h"

/* Returns the parsed document (free with cJSON_Delete) or NULL with err set. */
cJSON *hfq_json_load(const char *path, hfq_error *err);

#endif
