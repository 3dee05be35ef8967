// PLACEHOLDER (being written now) for the device helper headers.
#pragma once
