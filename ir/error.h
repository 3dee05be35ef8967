// adjoint::Error for the layers: the one exception type is public (include/adjoint/error.h)
// because embedding applications catch it.
#pragma once

#include "adjoint/error.h"
