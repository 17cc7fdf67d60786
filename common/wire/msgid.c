// SPDX-License-Identifier: Apache-2.0
/* PLACEHOLDER: being written */
#include <stddef.h>
